// Matrix products with AVX512-BF16 (VDPBF16PS) for activations that are exact BF16 values
// (FP8-rounded by the QAT emulation), with the register tiles of matmul_avx512.cc: FP4 decoded
// in registers into BF16 pairs, FP8 too for one pass of wide tiles, else dequantized into
// panels of BF16 pairs. Each lane adds its two products in the f32 paths' order, so the bits
// are theirs (see MatMulArgs::bf16_pairs). Called by the dispatcher (matmul.cc) after its CPU
// check; compiled with AVX512-BF16 and AVX512-VBMI flags.
// Re-entrant: no state; panels live in the caller's scratch.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "kernels/gemm/matmul_rows.h"
#include "kernels/gemm/matmul_simd.h"
#include "kernels/simd/avx512.h"
#include "model/matrix.h"

namespace flashserve::kernels::internal {
namespace {

struct Tiles : simd::Avx512 {
  static constexpr int kWideMr = 8;  // as in matmul_avx512.cc
  static constexpr int kWideNr = 3;
  static constexpr int kMaxMr = 4;
  static constexpr int kSingleNr = 8;
  // Weight rows per tile for 1-4 activation rows (gemm::NarrowNr): wider than the f32 paths' 4,
  // since a dot product covers two columns per lane. Zen 5, one core, FP4 768 x 1024 in L2,
  // fastest of 8 interleaved runs, us per call, 4 rows -> these: n = 2 22.4 -> 19.2 (2 x 12:
  // 27.1), n = 3 27.5 -> 23.0 (3 x 8: 24.7), n = 4 29.8 -> 27.3.
  static constexpr int kNarrowNr[5] = {0, 4, 8, 6, 6};
};

// VDPBF16PS: acc + w . x per lane, as two FMAs rounded to nearest, the product of the high
// halves first (the instruction ignores MXCSR; the dispatcher has ruled out subnormals, which
// it would flush).
inline __m512 DotPairs(__m512 w, __m512 x, __m512 acc) { return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x); }

// The word indices of one block's BF16 pairs, for a table whose 32 entries repeat its 16 (bit 4
// of an index is ignored): per pair column c (byte c of the block's 16), the low word's index
// is the byte's high nibble (the odd column), the high word's its low nibble (the even column).
// Two ways to the same indices from checkpoint-order bytes (which is faster depends on what else
// fills the FMA pipes), and one from the lane-pair layout.
enum class Fp4Indices {
  // VPMULTISHIFTQB on bytes 0-7 broadcast into qwords 0-3 and 8-15 into 4-7: one operation
  // beside the two broadcast loads (n = 1..4: 9-17% faster than kWidened), but in the FMA pipes.
  kMultishift,
  // VPMOVZXBD, two shifts and a merge: two more operations, none in the FMA pipes, which the
  // wide tiles (5-8 rows) fill with their dot products (n = 8: 5% faster than kMultishift).
  kWidened,
  // Data in model::Fp4Layout::kLanePairs: a 128-bit broadcast load and one shift per dword
  // (simd::Avx512::Fp4LanePairCodes), beside the dot products in the pipes (on Zen 4 a
  // VPMULTISHIFTQB and a VDPBF16PS take 2.0 cycles a pair, VPSRLVD and VDPBF16PS 1.0).
  kLanePairs,
};

template <Fp4Indices kHow>
inline __m512i Fp4WordIndices(const uint8_t* block) {
  if constexpr (kHow == Fp4Indices::kLanePairs) {
    return simd::Avx512::Fp4LanePairCodes(block);
  } else if constexpr (kHow == Fp4Indices::kMultishift) {
    // Qword o of the result covers pair columns 2o and 2o + 1: bit offsets of their bytes in
    // the qword broadcast into it (the high nibble first, then the low one, per byte).
    const __m512i shifts = _mm512_set_epi64(0x0038003C00300034, 0x0028002C00200024, 0x0018001C00100014,
                                            0x0008000C00000004, 0x0038003C00300034, 0x0028002C00200024,
                                            0x0018001C00100014, 0x0008000C00000004);
    int64_t lo, hi;
    std::memcpy(&lo, block, 8);
    std::memcpy(&hi, block + 8, 8);
    return _mm512_multishift_epi64_epi8(shifts, _mm512_mask_set1_epi64(_mm512_set1_epi64(lo), 0xF0, hi));
  } else {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(d, 4), _mm512_slli_epi32(d, 16),
                                     _mm512_set1_epi32(0x000F0000), 0xF8);  // a | (b & c)
  }
}

// Rows of an FP4 matrix seen as pair columns: pair column c is columns 2c and 2c + 1 in one
// 32-bit lane, the even column in the high half, so that lane l adds column 2l, then 2l + 1, of
// each block of 32 columns, as the f32 FP4 path does. Pair column c is weight byte c of the row.
// In lane pairs the rows go in groups (model::Fp4Layout): a row's block b lies b * 16 *
// kGroupRows bytes after its first, its scale b * kGroupRows; a tile within one group decodes
// every row from the first row's cursor (LoadGroup, gemm::WithinGroup), one data and one scale
// pointer for the whole tile.
template <Fp4Indices kHow>
struct Fp4PairRows {
  using F = __m512;
  static constexpr int kStep = 16;  // pair columns per Load: 32 columns, 16 bytes, one scale
  static constexpr int kStepBytes = 16;
  // Twice gemm::kPrefetchLead: with lane-pair decoding two threads' experts wait on DRAM more
  // than on decoding (medium, batch 8, three interleaved pairs: experts phase 20.7 / 20.1 /
  // 19.9 -> 16.6 / 17.8 / 18.8 ms per step; batch 1 the same within noise). The same lead for
  // every product slowed batch 1 and 32.
  static constexpr uintptr_t kPrefetchLead = 8192;
  static constexpr bool kScalesX = false;
  // 2: more than 8 rows go in passes of 8 (8 x 3 tiles), not of 4 (4 x 6). Zen 5, one core,
  // 768 x 1024 in L2, eight alternating runs, median us: n = 16 104 -> 97, n = 32 176 -> 158,
  // n = 48 309 -> 286; n = 12 (two passes of 6 x 3) 82 -> 84.
  static constexpr int kDecodeCost = 2;
  static constexpr int64_t kGroupRows = kHow == Fp4Indices::kLanePairs ? model::kFp4GroupRows : 1;
  static F Dot(F w, F x, F acc) { return DotPairs(w, x, acc); }
  struct Cursor {
    const uint8_t* q;
    const uint8_t* s;
    const uint16_t* luts;  // [256][32]: per scale byte, the 16 e2m1 values times the scale, twice, BF16
    // The pair columns [k, k + 16) of the row `row` rows after this one, in the same group.
    F Decode(int64_t k, int row) const {
      const int64_t block = k >> 4;
      const __m512i table = _mm512_load_si512(luts + (uint64_t{s[block * kGroupRows + row]} << 5));
      const __m512i codes = Fp4WordIndices<kHow>(q + block * 16 * kGroupRows + 16 * row);
      return _mm512_castsi512_ps(_mm512_permutexvar_epi16(codes, table));
    }
    void Load(int64_t k, F* w) const { w[0] = Decode(k, 0); }
    void Tail(int64_t, int, F* w) const { w[0] = _mm512_setzero_ps(); }  // cols % 32 == 0: never
  };
  template <int NR, int kVecs>
  static void LoadGroup(const Cursor& first, int64_t k, F (*w)[kVecs]) {
    for (int j = 0; j < NR; ++j) w[j][0] = first.Decode(k, j);
  }
  const MatMulArgs* a;
  Cursor Row(int64_t r) const {
    const gemm::Fp4RowStart start = gemm::Fp4Row<Tiles>(*a, r, kGroupRows);
    return {start.q, start.s, a->e2m1_bf16};
  }
  // Groups are contiguous, so a tile's bytes start about where a row-major row would.
  const uint8_t* RowStart(int64_t r) const { return a->data + (r < a->rows ? r : a->rows) * (a->cols / 2); }
  int64_t RowBytes() const { return a->cols / 2; }
};

// One instantiation per function, so that each gets its own register allocation (together, GCC
// 12 allocated the n = 1 tile worse, spilling a decoded vector: 5% slower).
template <Fp4Indices kHow>
[[gnu::noinline]] void Fp4Pairs(const MatMulArgs& args, const MatMulArgs& pairs, int64_t row_begin, int64_t row_end) {
  gemm::Rows<Tiles>(Fp4PairRows<kHow>{&args}, pairs, row_begin, row_end);
}

// Rows of an FP8 matrix decoded in registers into BF16 pairs (n < the panels' row count, cols a
// multiple of 32, scale tiles at least 32 columns wide: one scale per Load): pair l of each 32 columns g is columns g + l (high half) and g + 16 + l, as
// in the panels. A byte's magnitude (7 bits) indexes a 128-entry table of e4m3 values times the
// tile's scale (two VPERMI2W of 64 entries, chosen by bit 6), its sign is ORed in.
struct Fp8PairRows {
  using F = __m512;
  static constexpr int kStep = 16;  // pair columns per Load: 32 columns, 32 bytes
  static constexpr int kStepBytes = 32;
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = 1;
  static F Dot(F w, F x, F acc) { return DotPairs(w, x, acc); }
  // VPERMB control: both bytes of word 2l + 1 are byte l of the 32, both of word 2l byte 16 + l.
  static __m512i Spread() {
    alignas(64) static constexpr uint8_t kSpread[64] = {
        16, 16, 0, 0, 17, 17, 1, 1, 18, 18, 2, 2, 19, 19, 3, 3, 20, 20, 4, 4, 21, 21, 5, 5,
        22, 22, 6, 6, 23, 23, 7, 7, 24, 24, 8, 8, 25, 25, 9, 9, 26, 26, 10, 10, 27, 27, 11, 11,
        28, 28, 12, 12, 29, 29, 13, 13, 30, 30, 14, 14, 31, 31, 15, 15};
    return _mm512_load_si512(kSpread);
  }
  // 32 weights at q decoded with the table t (its four 64-byte quarters).
  static F Decode(const uint8_t* q, __m512i t0, __m512i t1, __m512i t2, __m512i t3) {
    const __m512i words =
        _mm512_permutexvar_epi8(Spread(), _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))));
    const __m512i low = _mm512_permutex2var_epi16(t0, words, t1);
    const __m512i high = _mm512_permutex2var_epi16(t2, words, t3);
    const __m512i mag = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(words, _mm512_set1_epi16(0x40)), low, high);
    return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(mag, words, _mm512_set1_epi16(static_cast<short>(0x8000)),
                                                         0xF8));  // a | (b & c)
  }
  struct Cursor {
    const uint8_t* q;
    const uint8_t* s;       // the row's band of scale tiles
    const uint16_t* luts;   // [256][128]: per scale byte, the e4m3 magnitudes times the scale, BF16
    int shift;              // log2(tile_cols)
    const uint16_t* Table(int64_t k) const { return luts + (uint64_t{s[(2 * k) >> shift]} << 7); }
    void Load(int64_t k, F* w) const {
      const uint16_t* t = Table(k);
      w[0] = Decode(q + 2 * k, _mm512_load_si512(t), _mm512_load_si512(t + 32), _mm512_load_si512(t + 64),
                    _mm512_load_si512(t + 96));
    }
    void Tail(int64_t, int, F* w) const { w[0] = _mm512_setzero_ps(); }  // whole pair groups: never
  };
  // All rows of a tile at step k: rows in one band of scale tiles share the table. With MR
  // activation rows, tiles of up to 18 accumulators keep all four quarters in registers, up to
  // 21 two (the other two stay memory operands), wider ones load per row. Measured on Zen 4,
  // one thread, FP8 768 x 1024 DRAM-cold, us per call: n = 5 75-76 -> 65-66, n = 6 84-86 ->
  // 73-74, n = 7 89-90 -> 81; at n = 8 (24 accumulators) sharing even two quarters was 1-7%
  // slower, so it loads per row as before.
  template <int MR, int NR, int kVecs>
  static void LoadRows(const Cursor (&rows)[NR], int64_t k, F (&w)[NR][kVecs]) {
    bool shared = MR * NR <= 21;
    for (int j = 1; j < NR; ++j) shared &= rows[j].s == rows[0].s;
    if (!shared) {
      for (int j = 0; j < NR; ++j) rows[j].Load(k, w[j]);
      return;
    }
    const uint16_t* t = rows[0].Table(k);
    const __m512i t0 = _mm512_load_si512(t), t2 = _mm512_load_si512(t + 64);
    if constexpr (MR * NR <= 18) {
      const __m512i t1 = _mm512_load_si512(t + 32), t3 = _mm512_load_si512(t + 96);
      for (int j = 0; j < NR; ++j) w[j][0] = Decode(rows[j].q + 2 * k, t0, t1, t2, t3);
    } else {
      for (int j = 0; j < NR; ++j)
        w[j][0] = Decode(rows[j].q + 2 * k, t0, _mm512_load_si512(t + 32), t2, _mm512_load_si512(t + 96));
    }
  }
  const MatMulArgs* a;
  Cursor Row(int64_t r) const {
    return {a->data + r * a->cols, a->scale + (r / a->tile_rows) * a->scale_cols, a->e4m3_bf16, a->tile_shift};
  }
  const uint8_t* RowStart(int64_t r) const { return a->data + (r < a->rows ? r : a->rows) * a->cols; }
  int64_t RowBytes() const { return a->cols; }
};

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

// Two vectors of exact BF16 values (f32) -> one of pairs: lane l = hi[l] (high half), lo[l].
inline __m512i Pack(__m512 hi, __m512 lo) {
  return _mm512_ternarylogic_epi32(_mm512_castps_si512(hi), _mm512_srli_epi32(_mm512_castps_si512(lo), 16),
                                   _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)), 0xE4);  // (a & c) | (b & ~c)
}

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

int Bf16ActivationFieldAvx512(const float* x, int64_t n, int64_t ldx, int64_t cols) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), low_mask = _mm512_set1_epi32(0xFFFF);
  __m512i low = _mm512_setzero_si512(), max = _mm512_setzero_si512(), min = _mm512_set1_epi32(-1);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * ldx;
    for (int64_t c = 0; c < cols; c += 16) {
      const __mmask16 in = cols - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - c)) - 1);
      const __m512i u = _mm512_and_si512(_mm512_maskz_loadu_epi32(in, row + c), abs_mask);
      low = _mm512_or_si512(low, _mm512_and_si512(u, low_mask));
      max = _mm512_max_epu32(max, u);
      min = _mm512_mask_min_epu32(min, _mm512_test_epi32_mask(u, u), min, u);  // nonzero values only
    }
    // Not BF16, or inf / NaN: f32 activations show it in their first row.
    if (_mm512_reduce_or_epi32(low) != 0 || static_cast<uint32_t>(_mm512_reduce_max_epu32(max)) >= 0x7F800000u)
      return -1;
  }
  const uint32_t least = static_cast<uint32_t>(_mm512_reduce_min_epu32(min));
  if (least == 0xFFFFFFFFu) return 255;  // all zero
  const int field = static_cast<int>(least >> 23);
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
  } else if (args.direct) {
    MatMulArgs pairs = args;
    pairs.cols = args.ldx;  // the tiles run over pair columns
    gemm::Rows<Tiles>(Fp8PairRows{&args}, pairs, row_begin, row_end);
  } else {
    Fp8PairPanels(args, row_begin, row_end, reinterpret_cast<uint32_t*>(scratch));
  }
}

}  // namespace flashserve::kernels::internal
