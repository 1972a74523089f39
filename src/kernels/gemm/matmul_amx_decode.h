// The AMX products' A-tile decoders, shared by matmul_amx.cc (exact BF16 activations) and
// matmul_amx_split.cc (split activations): FP4 and FP8 weight rows decoded exactly into BF16
// one step (32 columns) of a 16-row panel at a time (Fp8BitsRows, PanelSteps, PanelDecoder),
// streamed through a ring of decoded steps a few steps ahead of their products
// (StreamedPanels) or into whole panels the same way (PanelsDecodedAhead), and the first panels
// of a task requested ahead (WarmPanels). Internal
// linkage: included only by files built with AMX, AVX512-BF16 and AVX512-VBMI flags.
// Re-entrant; no state.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/gemm/matmul_amx_tiles.h"
#include "kernels/gemm/matmul_bf16_rows.h"

namespace flashserve::kernels::internal {
namespace {  // internal linkage: each including file gets its own copy, built with its flags

constexpr int kMaxPanels = 2;   // weight panels (16 rows each) decoded at a time
constexpr int kMaxCTiles = 4;   // C tiles per pass (AmxScratchFloats: the panels' tiles, then these)
constexpr int kLead = 1;  // panels between the one decoded and the one prefetched
constexpr int kRing = 4;        // steps of decoded tiles in flight where decoding streams
constexpr int kDecodeAhead = 3;  // steps between a step's decoding and its products (StreamedPanels)

// FP8 rows decoded by arithmetic into BF16 (the table decoder of matmul_bf16_rows.h reads four
// 64-byte tables per 32 weights: FP8 8192 x 512 at n = 1 ran several times slower than the f32
// path). With scale byte s, a normal e4m3 magnitude (e << 3 | m, e >= 1) times 2^(s - 127) is the BF16
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
// loop's cursors in memory and spilled its addresses). Streamed as matmul_amx.cc's Run does (one
// core, in L2, n = 1), these measured faster than the generic loop for FP4 and FP8, close to the
// AVX-512 f32 path.
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
// issued. A tile load of lines stored just before waits for them: with FP4 768 x 1024 at n = 1 on
// one core, kAhead 1 was much slower than kAhead 2 (a standalone loop too), and kAhead 3 faster
// than kAhead 2.
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
  static constexpr int64_t kAhead = kDecodeAhead;
  static_assert(kAhead < kRing);
  uint32_t* Slot(int64_t s) const { return ring_ + (s % kRing) * kTileWords; }
  DecodeStep decode_;
  int64_t steps_;
  uint32_t* ring_;
};

// Panels decoded in full into `panels` (panel j's step s at j * panel_stride + s * 256 words),
// each step kDecodeAhead steps before the first pass's products reach it, so that decoding
// overlaps them; later passes read the panels as decoded (prefill: 48 rows and more against one
// panel pair).
template <class DecodeStep>
class PanelsDecodedAhead {
 public:
  PanelsDecodedAhead(DecodeStep decode, int64_t steps, int64_t panel_stride, uint32_t* panels)
      : decode_(decode), steps_(steps), panel_stride_(panel_stride), panels_(panels) {
    for (int64_t s = 0; s < std::min<int64_t>(kDecodeAhead, steps); ++s) decode_(s, Step(s), panel_stride_);
  }
  const uint32_t* Tiles(int64_t s) const { return Step(s); }
  void After(int64_t s) const {
    if (s + kDecodeAhead < steps_) decode_(s + kDecodeAhead, Step(s + kDecodeAhead), panel_stride_);
  }

 private:
  uint32_t* Step(int64_t s) const { return panels_ + s * kTileWords; }
  DecodeStep decode_;
  int64_t steps_, panel_stride_;
  uint32_t* panels_;
};

// Requests the rows of a task's first `panels` panels from r0 into L2 (PanelDecoder requests
// each next panel while it decodes the one before).
template <class Src>
void WarmPanels(const Src& src, int64_t r0, int panels) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(src.RowStart(r0 + kLead * panels * kBlock));
  for (uintptr_t line = reinterpret_cast<uintptr_t>(src.RowStart(r0)) & ~uintptr_t{63}; line < end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
}

}  // namespace
}  // namespace flashserve::kernels::internal
