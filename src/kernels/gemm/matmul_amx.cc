// Matrix products on AMX tiles (TDPBF16PS) for activation rows that are exact BF16 values (the
// QAT emulation's FP8-rounded ones): FP4 and FP8 weights decoded exactly into BF16 (code times a
// power-of-two scale; FP4 by the decoders of matmul_bf16_rows.h, FP8 by Fp8BitsRows below) 16
// rows at a time into A tiles, activations packed once per call into B tiles (up to 16 rows
// each), products accumulated in C tiles; BF16 weights, and FP8 rows with other activations
// (split), go to matmul_amx_split.cc, which takes its FP8 panels from DecodeAmxFp8Panel here. Called by
// the dispatcher (matmul.cc) after its CPU check; compiled with AMX, AVX512-BF16 and
// AVX512-VBMI flags. Re-entrant: no state; panels live in the caller's scratch.
//
// Reduction order (what batch invariance rests on, measured by bench/amx_bits_probe and
// checked by matmul_amx_test): y[i, o] is the sum over K in steps of 32 columns, ascending,
// each step one TDPBF16PS of weight row o's 32 BF16 values against activation row i's, in the
// tile unit's own order and rounding (which no sequence of FMAs reproduces). Its bits depend on
// the step width and on the two rows only: not on the tile row o or the tile column i sit in,
// nor on the tile's other rows or its width, so a row's result is the same alone and in any
// batch.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "kernels/gemm/matmul_amx_tiles.h"
#include "kernels/gemm/matmul_bf16_rows.h"

namespace flashserve::kernels::internal {
namespace {

constexpr int kMaxPanels = 2;   // weight panels (16 rows each) decoded at a time
constexpr int kMaxCTiles = 4;   // C tiles per pass
constexpr int kLead = 1;  // panels between the one decoded and the one prefetched
constexpr int kRing = 4;        // steps of decoded tiles in flight where decoding streams

// FP8 rows decoded by arithmetic into BF16 (the table decoder of matmul_bf16_rows.h reads four
// 64-byte tables per 32 weights: FP8 8192 x 512 at n = 1 ran 3x slower than the f32 path). With
// scale byte s, a normal e4m3 magnitude (e << 3 | m, e >= 1) times 2^(s - 127) is the BF16
// (e + s - 7) << 7 | m << 4, i.e. (magnitude << 4) + ((s - 7) << 7); a subnormal one (e = 0) is
// (s - 7) << 7 plus a fixed offset per m, and zero is zero: magnitudes below 8 take
// Table(bias)'s entry, whose entry 0 is -bias; the sign is bit 7. Exact for scale bytes 10..246
// (AmxTakes). Words in column order (PackAmxActivations' natural order). Tiles at least 32
// columns wide: one scale per step.
struct Fp8BitsRows {
  static constexpr int64_t kGroupRows = 1;
  // The bias word of scale byte s: (s - 7) << 7.
  static __m512i Bias(uint8_t s) { return _mm512_set1_epi16(static_cast<short>((s - 7) << 7)); }
  // The words magnitudes 0..7 decode to, less the bias (m * 2^-9, normalized; 0 for zero).
  static __m512i Table(__m512i bias) {
    const __m512i subnormal = _mm512_setr_epi32(0xFF000000, 0xFFC0FF80, 0x00200000, 0x00600040, 0, 0, 0, 0, 0, 0, 0,
                                                0, 0, 0, 0, 0);
    return _mm512_mask_sub_epi16(subnormal, 1, subnormal, bias);  // word 0: 0 - bias
  }
  // 32 weights at p with the bias of their scale and its Table.
  static __m512i Decode32(const uint8_t* p, __m512i bias, __m512i table) {
    const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i mag = _mm512_and_si512(bytes, _mm512_set1_epi16(0x7F));
    __m512i v = _mm512_slli_epi16(mag, 4);
    v = _mm512_mask_permutexvar_epi16(v, _mm512_cmplt_epu16_mask(mag, _mm512_set1_epi16(8)), mag, table);
    v = _mm512_add_epi16(v, bias);
    return _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(bytes, 8), _mm512_set1_epi16(static_cast<short>(0x8000)),
                                     0xF8);  // a | (b & c)
  }
  struct Cursor {
    const uint8_t* q;
    const uint8_t* s;  // the row's band of scale tiles
    int shift;         // log2(tile_cols)
    // Pair columns [k, k + 16): weights 2k .. 2k + 31.
    void Load(int64_t k, __m512* w) const {
      const __m512i bias = Bias(s[(2 * k) >> shift]);
      *w = _mm512_castsi512_ps(Decode32(q + 2 * k, bias, Table(bias)));
    }
  };
  const MatMulArgs* a;
  Cursor Row(int64_t r) const { return {a->data + r * a->cols, a->scale + (r / a->tile_rows) * a->scale_cols, a->tile_shift}; }
  const uint8_t* RowStart(int64_t r) const { return a->data + (r < a->rows ? r : a->rows) * a->cols; }
};

// Whole panels (16 rows of the matrix) decoded one step at a time by a loop of the source's own,
// with its pointers set up once per panel, where the source has one (GCC 12 kept the generic
// loop's cursors in memory and spilled its addresses). Streamed as Run does, one core, in
// L2, n = 1, us per call, generic -> these (the AVX-512 f32 path alongside): FP4 768 x 1024
// 39.5 -> 31-32 (29-30), FP8 2048 x 512 103-105 -> 87-89 (75-77).
template <class Src>
struct PanelSteps {
  static constexpr bool kHas = false;
};

// FP4 in lane pairs: two groups of 8 rows, each from one data and one scale pointer.
template <>
struct PanelSteps<Fp4PairRows<Fp4Indices::kLanePairs>> {
  using Src = Fp4PairRows<Fp4Indices::kLanePairs>;
  static constexpr bool kHas = true;
  static bool Applies(const Src&, int64_t) { return true; }  // panels start on group boundaries
  static void Decode(const Src&, const Src::Cursor* groups, int64_t s, uint32_t* dst) {
    for (int g = 0; g < 2; ++g) {
      const Src::Cursor& first = groups[g];
      const uint8_t* q = first.q + s * 16 * Src::kGroupRows;
      const uint8_t* scales = first.s + s * Src::kGroupRows;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i table = _mm512_load_si512(first.luts + (uint64_t{scales[j]} << 5));
        const __m512i codes = Fp4WordIndices<Fp4Indices::kLanePairs>(q + 16 * j);
        _mm512_storeu_si512(dst + 16 * (8 * g + j), _mm512_permutexvar_epi16(codes, table));
      }
    }
  }
};


// FP8: 16 rows in one band of scale tiles share each step's scale.
template <>
struct PanelSteps<Fp8BitsRows> {
  static constexpr bool kHas = true;
  static bool Applies(const Fp8BitsRows& src, int64_t o0) { return o0 / src.a->tile_rows == (o0 + 15) / src.a->tile_rows; }
  static void Decode(const Fp8BitsRows& src, const Fp8BitsRows::Cursor* rows, int64_t s, uint32_t* dst) {
    const __m512i bias = Fp8BitsRows::Bias(rows[0].s[(32 * s) >> rows[0].shift]), table = Fp8BitsRows::Table(bias);
    const uint8_t* q = rows[0].q + 32 * s;
    const int64_t stride = src.a->cols;
    if (s % 2 == 0)  // each row's line 4 steps ahead into L1: 16 rows are more streams than it tracks
      for (int m = 0; m < 16; ++m) _mm_prefetch(reinterpret_cast<const char*>(q + m * stride + 128), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m) _mm512_storeu_si512(dst + 16 * m, Fp8BitsRows::Decode32(q + m * stride, bias, table));
  }
};

// The weight rows of up to kMaxPanels panels of 16 (rows past the matrix's part zero), decoded
// one step (32 columns) at a time into A tiles of 16 rows x 16 BF16 pairs, in the decoders'
// pair order, panel j's tile j * panel_stride words after the first: whole panels by the
// source's PanelSteps where it has them, others row by row (groups from their first row).
template <class Src>
class PanelDecoder {
 public:
  static constexpr int kGroup = static_cast<int>(gemm::GroupRows<Src>());
  static_assert(kBlock % kGroup == 0);

  // Each step also requests its share of the next panels' bytes (rows o0 + P .. o0 + 2P, P =
  // panels * 16; past r1 most likely the same thread's next task): hardware prefetchers stop at
  // page boundaries, and an FP4 group of 8 rows of 1024 columns is one page.
  PanelDecoder(const Src& src, int64_t o0, int64_t r1, int panels, int64_t steps)
      : src_(src), panels_(panels), count_(static_cast<int>(std::clamp<int64_t>(r1 - o0, 0, panels * kBlock))) {
    for (int m = 0; m < count_; m += kGroup) cursors_[m / kGroup] = src.Row(o0 + m);
    for (int p = 0; p < panels; ++p) {
      if constexpr (PanelSteps<Src>::kHas) whole_[p] = count_ >= (p + 1) * kBlock && PanelSteps<Src>::Applies(src, o0 + p * kBlock);
    }
    next_ = reinterpret_cast<uintptr_t>(src.RowStart(o0 + kLead * panels * kBlock)) & ~uintptr_t{63};
    end_ = reinterpret_cast<uintptr_t>(src.RowStart(o0 + (kLead + 1) * panels * kBlock));
    lines_ = end_ > next_ ? static_cast<int>((end_ - next_ + 64 * steps - 1) / (64 * steps)) : 0;
  }
  // Whether panel p decodes whole (PanelSteps), from cursors() + p * 16 / kGroup.
  bool Whole(int p) const { return whole_[p]; }
  const typename Src::Cursor* cursors() const { return cursors_; }
  // Step s's share of the prefetches.
  void Prefetch(int64_t s) const {
    const uintptr_t first = next_ + static_cast<uintptr_t>(s) * lines_ * 64;
    for (int p = 0; p < lines_; ++p)
      if (first + 64 * p < end_) _mm_prefetch(reinterpret_cast<const char*>(first + 64 * p), _MM_HINT_T1);
  }
  void Decode(int64_t s, uint32_t* tiles, int64_t panel_stride) const {
    Prefetch(s);
    for (int p = 0; p < panels_; ++p) {
      uint32_t* dst = tiles + p * panel_stride;
      if constexpr (PanelSteps<Src>::kHas) {
        if (whole_[p]) {
          PanelSteps<Src>::Decode(src_, cursors_ + p * kBlock / kGroup, s, dst);
          continue;
        }
      }
      for (int m = 0; m < kBlock; ++m) {
        const int row = p * kBlock + m;
        _mm512_storeu_si512(dst + 16 * m, row < count_ ? Row(row, s) : _mm512_setzero_si512());
      }
    }
  }

 private:
  __m512i Row(int row, int64_t s) const {
    __m512 w;
    if constexpr (kGroup > 1) {
      w = cursors_[row / kGroup].Decode(16 * s, row % kGroup);
    } else {
      cursors_[row].Load(16 * s, &w);
    }
    return _mm512_castps_si512(w);
  }
  const Src& src_;
  int panels_, count_, lines_;
  bool whole_[kMaxPanels] = {};
  typename Src::Cursor cursors_[kMaxPanels * kBlock / kGroup];
  uintptr_t next_, end_;
};

// Decodes each step kAhead steps before its products, into a ring of kRing slots, with
// decode(s, tiles, panel_stride) (panel j of a step at j * kPanelStride words). Tiles(s) gives
// step s's (decoded before), After(s) decodes step s + kAhead once step s's tile loads are
// issued. A tile load of lines stored just before waits for them: FP4 768 x 1024 at n = 1, one
// core, us per call: kAhead 1 about 1.6x kAhead 2 (a standalone loop: 55 against 35 cycles per
// step), kAhead 3 39-40 against kAhead 2's 47-57.
template <class DecodeStep>
class StreamedPanels {
 public:
  static constexpr int64_t kPanelStride = kRing * kTileWords;
  StreamedPanels(DecodeStep decode, int64_t steps, uint32_t* ring) : decode_(decode), steps_(steps), ring_(ring) {
    for (int64_t s = 0; s < std::min<int64_t>(kAhead, steps); ++s) decode_(s, Slot(s), kPanelStride);
  }
  const uint32_t* Tiles(int64_t s) const { return Slot(s); }
  void After(int64_t s) const {
    if (s + kAhead < steps_) decode_(s + kAhead, Slot(s + kAhead), kPanelStride);
  }

 private:
  static constexpr int64_t kAhead = 3;
  static_assert(kAhead < kRing);
  uint32_t* Slot(int64_t s) const { return ring_ + (s % kRing) * kTileWords; }
  DecodeStep decode_;
  int64_t steps_;
  uint32_t* ring_;
};

// Panels decoded in full beforehand.
struct WholePanels {
  const uint32_t* panels;
  const uint32_t* Tiles(int64_t s) const { return panels + s * kTileWords; }
  void After(int64_t) const {}
};

// One activation block: one weight panel (A: tmm0) against it (B: tmm3), C in tmm4. One chain
// of products into one C tile runs at the unit's full rate here (5.8 ns per TDPBF16PS, as four
// independent chains), and three panels decoded side by side ran slower at n = 1 (FP8 8192 x 512,
// one core: 620-1000 against 475-500 us per call; the 48 rows' streams miss more).
// a_panels.Tiles(s): where step s's A tile is, a_panels.After(s) runs once its tile loads are
// issued. xb: the block's B tiles, `width` words per row, one per step.
template <class APanels>
void MultiplyOneBlock(const APanels& a_panels, const uint32_t* xb, int64_t width, int64_t steps, float* out) {
  MemoryBarrier();
  _tile_zero(4);
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t* a = a_panels.Tiles(s);
    MemoryBarrier();
    _tile_loadd(3, xb + s * 16 * width, 4 * width);
    _tile_loadd(0, a, 64);
    _tile_dpbf16ps(4, 0, 3);
    MemoryBarrier();
    a_panels.After(s);
  }
  _tile_stored(4, out, 64);
  MemoryBarrier();
}

// Two weight panels (A: tmm0-1) against kBlocks activation blocks (B: tmm2-3); C tile of
// panel j and block b in tmm(4 + 2b + j), stored to out in that order.
template <int kBlocks, class APanels>
void MultiplyTwoPanels(const APanels& a_panels, int64_t panel_stride, const uint32_t* xb, int64_t x_stride,
                       int64_t steps, float* out) {
  static_assert(kBlocks >= 1 && kBlocks <= 2);
  MemoryBarrier();
  ZeroCTiles<2 * kBlocks>();
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t* a = a_panels.Tiles(s);
    MemoryBarrier();
    const uint32_t* b = xb + s * kTileWords;
    _tile_loadd(2, b, 64);
    _tile_loadd(0, a, 64);
    _tile_dpbf16ps(4, 0, 2);
    _tile_loadd(1, a + panel_stride, 64);
    _tile_dpbf16ps(5, 1, 2);
    if constexpr (kBlocks > 1) {
      _tile_loadd(3, b + x_stride, 64);
      _tile_dpbf16ps(6, 0, 3);
      _tile_dpbf16ps(7, 1, 3);
    }
    MemoryBarrier();
    a_panels.After(s);
  }
  StoreCTiles<2 * kBlocks>(out);
  MemoryBarrier();
}

// Weight rows [r0, r1) against every activation block: with one block (n <= 16), panels of 16
// rows; with more, panels of 32 rows against pairs of blocks (2 x 2 C tiles). Up to two blocks,
// each step's tiles are decoded just before their products, into a ring of kRing slots that
// stays in L1; more blocks read a whole decoded panel (in L2) once per pair of blocks.
template <class Src>
void Run(const Src& src, const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  const int64_t steps = a.cols / 32, width = BlockWidth(a.n), x_stride = steps * 16 * width;
  const int64_t blocks = (a.n + kBlock - 1) / kBlock;
  const int panels = blocks == 1 ? 1 : 2;
  uint32_t* buffer = AlignTo64(reinterpret_cast<uint32_t*>(scratch));  // tile rows on cache lines
  float* c = reinterpret_cast<float*>(buffer + kMaxPanels * std::max<int64_t>(steps, kRing) * kTileWords);
  const uint32_t* x = reinterpret_cast<const uint32_t*>(a.x);
  const uintptr_t warm_end = reinterpret_cast<uintptr_t>(src.RowStart(r0 + kLead * panels * kBlock));  // the first panels
  for (uintptr_t line = reinterpret_cast<uintptr_t>(src.RowStart(r0)) & ~uintptr_t{63}; line < warm_end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
  for (int64_t o0 = r0; o0 < r1; o0 += panels * kBlock) {
    const PanelDecoder<Src> decoder(src, o0, r1, panels, steps);
    if (blocks <= 2) {
      if constexpr (PanelSteps<Src>::kHas) {
        // One whole panel: the source's own loop, which the compiler keeps in registers (the
        // generic decoder's per-panel checks cost it its registers; PanelSteps has the numbers).
        if (blocks == 1 && decoder.Whole(0)) {
          const auto whole = [&src, &decoder](int64_t s, uint32_t* tiles, int64_t) {
            decoder.Prefetch(s);
            PanelSteps<Src>::Decode(src, decoder.cursors(), s, tiles);
          };
          MultiplyOneBlock(StreamedPanels<decltype(whole)>(whole, steps, buffer), x, width, steps, c);
          ScatterTile(a, c, 0, o0, r1 - o0);
          continue;
        }
      }
      const auto generic = [&decoder](int64_t s, uint32_t* tiles, int64_t stride) { decoder.Decode(s, tiles, stride); };
      const StreamedPanels<decltype(generic)> streamed(generic, steps, buffer);
      if (blocks == 1) {
        MultiplyOneBlock(streamed, x, width, steps, c);
      } else {
        MultiplyTwoPanels<2>(streamed, streamed.kPanelStride, x, x_stride, steps, c);
      }
    } else {
      for (int64_t s = 0; s < steps; ++s) decoder.Decode(s, buffer + s * kTileWords, steps * kTileWords);
      const WholePanels whole{buffer};
      for (int64_t b = 0; b < blocks; b += 2) {
        const int group = blocks - b >= 2 ? 2 : 1;
        if (group == 2) {
          MultiplyTwoPanels<2>(whole, steps * kTileWords, x + b * x_stride, x_stride, steps, c);
        } else {
          MultiplyTwoPanels<1>(whole, steps * kTileWords, x + b * x_stride, x_stride, steps, c);
        }
        for (int g = 0; g < group; ++g)
          for (int j = 0; j < 2; ++j)
            ScatterTile(a, c + (2 * g + j) * kTileWords, (b + g) * kBlock, o0 + j * kBlock, r1 - o0 - j * kBlock);
      }
      continue;
    }
    for (int g = 0; g < blocks; ++g)  // one block: one tile; two: tile 2g + j
      for (int j = 0; j < panels; ++j) ScatterTile(a, c + (2 * g + j) * kTileWords, g * kBlock, o0 + j * kBlock, r1 - o0 - j * kBlock);
  }
}

}  // namespace

void DecodeAmxFp8Panel(const MatMulArgs& a, int64_t o0, uint32_t* tiles) {
  FS_CHECK(a.format == model::MatrixFormat::kFp8, "DecodeAmxFp8Panel takes FP8 weights");
  const int64_t steps = a.cols / 32;
  const Fp8BitsRows src{&a};
  const PanelDecoder<Fp8BitsRows> decoder(src, o0, a.rows, 1, steps);
  for (int64_t s = 0; s < steps; ++s) decoder.Decode(s, tiles + s * kTileWords, 0);
}

int64_t AmxScratchFloats(int64_t cols) {
  return (kMaxPanels * std::max<int64_t>(cols / 32, kRing) + kMaxCTiles) * kTileWords + 16;  // + alignment
}

void PackAmxActivations(const float* x, int64_t ldx, const int32_t* rows, int64_t n, int64_t cols, bool fp4, int64_t b0,
                        int64_t b1, uint32_t* out) {
  FS_CHECK(reinterpret_cast<uintptr_t>(out) % 64 == 0, "AMX activation tiles must be 64-byte aligned");
  const int64_t steps = cols / 32;
  // Pairs [16 s, 16 s + 16) of one row: FP4 order, or column order.
  const auto pairs = [&](int64_t i, int64_t s, __m512i* v) {
    const float* src = x + rows[i] * ldx + 32 * s;
    const __m512 lo = _mm512_loadu_ps(src), hi = _mm512_loadu_ps(src + 16);
    v[0] = fp4 ? Fp4PairHalves(lo, hi) : HighHalves(lo, hi);
  };
  if (n == 1) {  // one-column tiles: the row's pairs in order
    for (int64_t s = 0; s < steps; ++s) pairs(0, s, reinterpret_cast<__m512i*>(out + 16 * s));
    return;
  }
  PackBlocks<1>(n, steps, b0, b1, 0, pairs, out);
}

void MatMulRowsAmx(const MatMulArgs& a, const std::function<bool(int64_t*, int64_t*)>& next_rows, float* scratch) {
  const bool split = a.amx_split;
  ConfigureTiles(BlockWidth(a.n), split);  // once per thread and call: 140 ns with its release
  int64_t r0 = 0, r1 = 0;
  while (next_rows(&r0, &r1)) {
    if (split) {
      AmxSplitRows(a, r0, r1, scratch);
    } else if (a.format == model::MatrixFormat::kFp4 && a.fp4_lane_pairs) {
      Run(Fp4PairRows<Fp4Indices::kLanePairs>{&a}, a, r0, r1, scratch);
    } else if (a.format == model::MatrixFormat::kFp4) {
      Run(Fp4PairRows<Fp4Indices::kMultishift>{&a}, a, r0, r1, scratch);
    } else {
      Run(Fp8BitsRows{&a}, a, r0, r1, scratch);
    }
  }
  _tile_release();  // the tile state goes back to its initial one: context switches skip it
}

}  // namespace flashserve::kernels::internal
