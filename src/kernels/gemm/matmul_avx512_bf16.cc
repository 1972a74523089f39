// Matrix products with AVX512-BF16 (VDPBF16PS) for activations that are exact BF16 values
// (FP8-rounded by the QAT emulation; the head's input rounded to BF16), with the register tiles
// of matmul_avx512.cc: FP4 decoded in registers into BF16 pairs, FP8 too for one pass of wide
// tiles, BF16 weights rearranged in registers (the decoders in matmul_bf16_rows.h), else FP8
// dequantized into panels of BF16 pairs. Each lane adds its two products in the f32 paths'
// order, so the bits are theirs (see MatMulArgs::bf16_pairs). Called by the dispatcher
// (matmul.cc) after its CPU check; compiled with AVX512-BF16 and AVX512-VBMI flags.
// Re-entrant: no state; panels live in the caller's scratch.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "kernels/gemm/matmul_bf16_rows.h"

namespace flashserve::kernels::internal {
namespace {

// One instantiation per function, so that each gets its own register allocation (together, GCC
// 12 allocated the n = 1 tile worse, spilling a decoded vector, and it ran slower).
template <Fp4Indices kHow>
[[gnu::noinline]] void Fp4Pairs(const MatMulArgs& args, const MatMulArgs& pairs, int64_t row_begin, int64_t row_end) {
  gemm::Rows<Tiles>(Fp4PairRows<kHow>{&args}, pairs, row_begin, row_end);
}

[[gnu::noinline]] void Bf16Pairs(const MatMulArgs& args, int64_t row_begin, int64_t row_end) {
  MatMulArgs pairs = args;
  pairs.cols = args.ldx;  // the tiles run over pair columns
  gemm::Rows<Tiles>(Bf16PairRows{&args}, pairs, row_begin, row_end);
}

// A panel of rows already in BF16 pairs (stride ld pairs, zero-padded).
struct PairPanelRows {
  using F = __m512;
  static constexpr int kStep = 16;
  static constexpr int kStepBytes = 0;  // already in cache: no prefetch
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = 0;
  static F Dot(F w, F x, F acc) { return DotPairs(w, x, acc); }
  struct Cursor {
    const uint32_t* p;
    void Load(int64_t k, F* w) const { w[0] = _mm512_castsi512_ps(_mm512_loadu_si512(p + k)); }
    void Tail(int64_t k, int, F* w) const { Load(k, w); }  // ld is a multiple of 16: never
  };
  const uint32_t* panel;
  int64_t ld;
  int64_t row0;
  Cursor Row(int64_t r) const { return {panel + (r - row0) * ld}; }
  const uint8_t* RowStart(int64_t) const { return nullptr; }
  int64_t RowBytes() const { return ld * 4; }
};

// FP8 rows [r0, r1) dequantized (the vector decoder, weights times their tile factor: exact)
// into BF16 pairs in the FP8 path's order: per 32 columns g, lane l holds columns g + l (high)
// and g + 16 + l, as the f32 path's lane l adds them (blocks of 16 in ascending order).
void FillPairPanel(const MatMulArgs& a, int64_t r0, int64_t r1, int64_t ld, uint32_t* panel) {
  using Src = gemm::Fp8Rows<Tiles, gemm::Fp8Scale::kWeights, false>;
  const Src src{&a};
  for (int64_t r = r0; r < r1; ++r) {
    const Src::Cursor row = src.Row(r);
    uint32_t* dst = panel + (r - r0) * ld;
    for (int64_t k = 0; k < ld * 2; k += 32) {
      __m512 half[2];
      for (int h = 0; h < 2; ++h) {
        const int64_t c = k + 16 * h;
        if (c + 16 <= a.cols) {
          row.Load(c, &half[h]);
        } else if (c < a.cols) {
          row.Tail(c, static_cast<int>(a.cols - c), &half[h]);
        } else {
          half[h] = _mm512_setzero_ps();
        }
      }
      _mm512_storeu_si512(dst + k / 2, Pack(half[0], half[1]));
    }
  }
}

// FP8 in panels of BF16 pairs: each panel is dequantized once and multiplied by every
// activation row; the next panel's weights stream in meanwhile (as gemm::PanelRowsPass).
void Fp8PairPanels(const MatMulArgs& a, int64_t r0, int64_t r1, uint32_t* scratch) {
  const int64_t ld = a.ldx;  // pairs per row, a multiple of 16
  MatMulArgs pairs = a;
  pairs.cols = ld;  // the tiles run over pair columns
  const gemm::Fp8Rows<Tiles, gemm::Fp8Scale::kWeights, false> raw{&a};
  for (int64_t p0 = r0; p0 < r1; p0 += a.panel_rows) {
    const int64_t p1 = r1 - p0 < a.panel_rows ? r1 : p0 + a.panel_rows;
    const gemm::PrefetchSpan next{reinterpret_cast<uintptr_t>(raw.RowStart(p1)),
                                  reinterpret_cast<uintptr_t>(raw.RowStart(p1 + a.panel_rows))};
    FillPairPanel(a, p0, p1, ld, scratch);
    gemm::Rows<Tiles>(PairPanelRows{scratch, ld, p0}, pairs, p0, p1, next);
  }
}

// Seconds for `steps` rounds of 12 independent `op`s on vector accumulators (throughput, not
// latency: each chain waits on its own previous result only).
template <class Op>
double ChainsSeconds(Op op, int steps) {
  constexpr int kChains = 12;
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
  const auto begin = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < kChains; ++i) acc[i] = op(acc[i], a, b);
    asm volatile("" : "+v"(a), "+v"(b));  // no hoisting or folding across rounds
  }
  const auto end = std::chrono::steady_clock::now();
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(sum);
  (void)sink;
  return std::chrono::duration<double>(end - begin).count();
}

}  // namespace

double Bf16DotRateVsFmaAvx512() {
  constexpr int kSteps = 4096, kTries = 3;
  double fma = std::numeric_limits<double>::infinity(), dot = fma;
  for (int t = 0; t < kTries; ++t) {
    fma = std::min(fma, ChainsSeconds([](__m512 c, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, c); }, kSteps));
    dot = std::min(dot, ChainsSeconds([](__m512 c, __m512 a, __m512 b) { return DotPairs(a, b, c); }, kSteps));
  }
  return fma / dot;
}

// Per 16 values with bits v and magnitude bits u: the low 16 bits ORed (zero: exact BF16), the
// largest u (from 0x7F800000: inf or NaN), and the least u - 1 (zero wraps past every nonzero
// value). Two sets of accumulators per row, for two vectors per iteration; no mask registers in
// the loop (measured faster than one masked vector per iteration).
int Bf16ActivationFieldAvx512(const float* x, int64_t n, int64_t ldx, int64_t cols) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), low_mask = _mm512_set1_epi32(0xFFFF);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i below = _mm512_set1_epi32(-1);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * ldx;
    __m512i low[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, max[2] = {low[0], low[0]};
    __m512i least[2] = {below, below};
    const auto add = [&](int k, __m512i v) {
      low[k] = _mm512_ternarylogic_epi32(low[k], v, low_mask, 0xF8);  // a | (b & c)
      const __m512i u = _mm512_and_si512(v, abs_mask);
      max[k] = _mm512_max_epu32(max[k], u);
      least[k] = _mm512_min_epu32(least[k], _mm512_sub_epi32(u, one));
    };
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
      add(0, _mm512_loadu_si512(row + c));
      add(1, _mm512_loadu_si512(row + c + 16));
    }
    for (; c < cols; c += 16) {
      const __mmask16 in = cols - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c)) - 1);
      add(0, _mm512_maskz_loadu_epi32(in, row + c));
    }
    // Not BF16, or inf / NaN: f32 activations show it in their first row.
    const __m512i l = _mm512_or_si512(low[0], low[1]), m = _mm512_max_epu32(max[0], max[1]);
    if (_mm512_test_epi32_mask(l, l) != 0 || _mm512_cmpge_epu32_mask(m, _mm512_set1_epi32(0x7F800000)) != 0) return -1;
    below = _mm512_min_epu32(below, _mm512_min_epu32(least[0], least[1]));
  }
  const uint32_t least = static_cast<uint32_t>(_mm512_reduce_min_epu32(below));
  if (least == 0xFFFFFFFFu) return 255;  // all zero
  const int field = static_cast<int>((least + 1) >> 23);
  return field >= 1 ? field : -1;
}

void PackBf16PairsAvx512(const float* x, int64_t n, int64_t ldx, int64_t cols, bool fp4, int64_t pairs, uint32_t* out) {
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odds = _mm512_add_epi32(evens, _mm512_set1_epi32(1));
  for (int64_t i = 0; i < n; ++i) {
    const float* src = x + i * ldx;
    uint32_t* dst = out + i * pairs;
    for (int64_t g = 0; g < pairs * 2; g += 32) {  // 32 columns -> 16 pairs
      const auto load = [&](int64_t c) {
        const int64_t left = cols - c;
        const __mmask16 in = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
        return _mm512_maskz_loadu_ps(in, src + c);
      };
      const __m512 a = load(g), b = load(g + 16);
      // FP4: pair c = columns (2c, 2c + 1); FP8: pair l of the group = columns (g + l, g + 16 + l).
      const __m512 hi = fp4 ? _mm512_permutex2var_ps(a, evens, b) : a;
      const __m512 lo = fp4 ? _mm512_permutex2var_ps(a, odds, b) : b;
      _mm512_storeu_si512(dst + g / 2, Pack(hi, lo));
    }
  }
}

void MatMulRowsAvx512Bf16(const MatMulArgs& args, int64_t row_begin, int64_t row_end, float* scratch) {
  if (args.format == model::MatrixFormat::kFp4) {
    MatMulArgs pairs = args;
    pairs.cols = args.cols / 2;  // the tiles run over pair columns
    if (args.fp4_lane_pairs) {
      Fp4Pairs<Fp4Indices::kLanePairs>(args, pairs, row_begin, row_end);
    } else if (args.n > Tiles::kMaxMr && args.n <= Tiles::kWideMr) {  // one pass of wide tiles
      Fp4Pairs<Fp4Indices::kWidened>(args, pairs, row_begin, row_end);
    } else {
      Fp4Pairs<Fp4Indices::kMultishift>(args, pairs, row_begin, row_end);
    }
  } else if (args.format == model::MatrixFormat::kBF16) {
    Bf16Pairs(args, row_begin, row_end);
  } else if (args.direct) {
    MatMulArgs pairs = args;
    pairs.cols = args.ldx;  // the tiles run over pair columns
    gemm::Rows<Tiles>(Fp8PairRows{&args}, pairs, row_begin, row_end);
  } else {
    Fp8PairPanels(args, row_begin, row_end, reinterpret_cast<uint32_t*>(scratch));
  }
}

}  // namespace flashserve::kernels::internal
