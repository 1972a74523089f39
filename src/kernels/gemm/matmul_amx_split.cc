// AMX products of BF16 weights (the output head), and of FP8 weights with activations that are
// not exact BF16 values (wo_a, whose input is not FP8-rounded), with f32 activations: every activation is split
// exactly into three BF16 parts, x = h0 + h1 + h2 (the top, middle and bottom 8 bits of its 24-bit
// significand: h0 = x with its low 16 bits cleared, h1 likewise of x - h0, h2 = x - h0 - h1), so
// that each product with a weight is exact and one TDPBF16PS per part and step accumulates
// them: y[i, o] = sum over 32-column steps, ascending, of the parts 0, 1, 2 in that order. The
// BF16 weights are read in place as A tiles (16 rows of 32 BF16 each, one row per matrix row),
// FP8 weights decoded exactly into them (matmul_amx_decode.h): a step at a time, a few steps
// ahead of their products, against up to two activation blocks; a panel at a time, read by every
// block pair, against more (PanelAt). Like
// matmul_amx.cc's products, the bits are the tile unit's own and depend only on the two rows, so
// a row's result is the same in any batch; parts below the normal range (|x| under 2^-110 or so)
// are flushed to zero by the unit. Called by MatMulRowsAmx (matmul_amx.cc) with its tiles
// configured; compiled with AMX flags. Re-entrant: no state.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "kernels/gemm/matmul_amx_decode.h"

namespace flashserve::kernels::internal {
namespace {

constexpr int kParts = 3;

// The three parts of 16 activations (exact: each subtraction removes the leading bits). An
// infinite activation makes its row's outputs NaN (Inf - Inf), as a NaN one does.
struct Parts {
  __m512 h[kParts];
};
Parts Split(__m512 x) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  Parts p;
  p.h[0] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), top));
  const __m512 rest = _mm512_sub_ps(x, p.h[0]);
  p.h[1] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(rest), top));
  p.h[2] = _mm512_sub_ps(rest, p.h[1]);
  return p;
}

// Where a panel's A tiles are: step s's at base + s * step_bytes, row stride `stride` bytes.
struct APanel {
  const uint8_t* base;
  int64_t step_bytes, stride;
};

// The rows [o0, rows) of a panel that runs past the matrix's end, zero-padded to 16, copied into
// one A tile per step (tile loads read whole rows of 16).
APanel CopyTail(const MatMulArgs& a, int64_t o0, int64_t steps, uint32_t* copy) {
  const int64_t row_bytes = a.cols * 2;
  for (int64_t s = 0; s < steps; ++s)
    for (int m = 0; m < kBlock; ++m) {
      uint8_t* dst = reinterpret_cast<uint8_t*>(copy + s * kTileWords + 16 * m);
      if (o0 + m < a.rows) {
        std::memcpy(dst, a.data + (o0 + m) * row_bytes + 64 * s, 64);
      } else {
        std::memset(dst, 0, 64);
      }
    }
  return {reinterpret_cast<const uint8_t*>(copy), kTileWords * 4, 64};
}

// The panel of weight rows [first, first + 16): BF16 rows in place (a panel past the matrix's
// end copied, CopyTail), FP8 rows decoded in full into `buffer` (cols / 32 tiles, zero past the
// matrix's end).
APanel PanelAt(const MatMulArgs& a, int64_t first, int64_t steps, uint32_t* buffer) {
  if (a.format == model::MatrixFormat::kFp8) {
    const Fp8BitsRows src{&a};  // outlives the decoder, which keeps a reference
    const PanelDecoder<Fp8BitsRows> decoder(src, first, a.rows, 1, steps);
    for (int64_t s = 0; s < steps; ++s) decoder.Decode(s, buffer + s * kTileWords, 0);
    return {reinterpret_cast<const uint8_t*>(buffer), kTileWords * 4, 64};
  }
  const int64_t row_bytes = a.cols * 2;
  return first + kBlock <= a.rows ? APanel{a.data + first * row_bytes, 64, row_bytes} : CopyTail(a, first, steps, buffer);
}

// BF16 rows from `first` for a pass to request one line per row and step, where 16 * `panels`
// rows are there (FP8 panels are requested by their decoder).
const uint8_t* RowsAhead(const MatMulArgs& a, int64_t first, int panels) {
  if (a.format == model::MatrixFormat::kFp8 || first + panels * kBlock > a.rows) return nullptr;
  return a.data + first * a.cols * 2;
}

// Where MultiplyBlock's and MultiplyPanelPair's A tiles are: panel j's tile of step s at
// Tile(j, s), its rows Stride(j) bytes apart; After(s) runs once step s's tile loads are issued.
// Here panels read in place (BF16 rows) or decoded in full (APanel), After(s) requesting one line
// of each of the `ahead` rows from `next` (null: none), what the next panels' step s reads.
struct InPlaceTiles {
  APanel panels[2];
  const uint8_t* next;
  int64_t next_stride;
  int ahead;
  const uint8_t* Tile(int j, int64_t s) const { return panels[j].base + s * panels[j].step_bytes; }
  int64_t Stride(int j) const { return panels[j].stride; }
  void After(int64_t s) const {
    if (next != nullptr)
      for (int m = 0; m < ahead; ++m) _mm_prefetch(reinterpret_cast<const char*>(next + m * next_stride + 64 * s), _MM_HINT_T1);
  }
};

// FP8 panels decoded a few steps ahead of their products into a ring (StreamedPanels): After(s)
// decodes a later step once step s's tile loads are issued.
template <class Streamed>
struct RingTiles {
  const Streamed& streamed;
  const uint8_t* Tile(int j, int64_t s) const {
    return reinterpret_cast<const uint8_t*>(streamed.Tiles(s) + j * Streamed::kPanelStride);
  }
  int64_t Stride(int) const { return 64; }
  void After(int64_t s) const { streamed.After(s); }
};

// Calls multiply(tiles) with the A tiles of the FP8 panels [o0, o0 + 16 * panels) (rows from r1
// on zero) decoded a step at a time into `ring` while the products of earlier steps run (RingTiles),
// not in full before them (decoded in full, wo_a's 256 x 2048 at n = 1 on one core ran well behind
// the AVX-512 path).
template <class Multiply>
void WithFp8Ring(const MatMulArgs& a, int64_t o0, int64_t r1, int panels, int64_t steps, uint32_t* ring,
                 const Multiply& multiply) {
  const Fp8BitsRows src{&a};
  const PanelDecoder<Fp8BitsRows> decoder(src, o0, r1, panels, steps);
  if (panels == 1 && decoder.Whole(0)) {  // the panel loop of its own (PanelSteps)
    const auto whole = [&src, &decoder](int64_t s, uint32_t* tiles, int64_t) {
      decoder.Prefetch(s);
      PanelSteps<Fp8BitsRows>::Decode(src, decoder.cursors(), s, tiles);
    };
    const StreamedPanels<decltype(whole)> streamed(whole, steps, ring);
    multiply(RingTiles<decltype(streamed)>{streamed});
    return;
  }
  const auto generic = [&decoder](int64_t s, uint32_t* tiles, int64_t stride) { decoder.Decode(s, tiles, stride); };
  const StreamedPanels<decltype(generic)> streamed(generic, steps, ring);
  multiply(RingTiles<decltype(streamed)>{streamed});
}

// C (tmm4) = the panel against one block of activations (B tiles of the three parts, tmm1-3),
// stored to c.
template <class ATiles>
void MultiplyBlock(const ATiles& a_tiles, const uint32_t* xb, int64_t part_words, int64_t width, int64_t steps,
                   float* c) {
  const int64_t b_tile = 16 * width;
  MemoryBarrier();
  _tile_zero(4);
  for (int64_t s = 0; s < steps; ++s) {
    MemoryBarrier();
    _tile_loadd(0, a_tiles.Tile(0, s), a_tiles.Stride(0));
    const uint32_t* b = xb + s * b_tile;
    _tile_loadd(1, b, 4 * width);
    _tile_loadd(2, b + part_words, 4 * width);
    _tile_loadd(3, b + 2 * part_words, 4 * width);
    _tile_dpbf16ps(4, 0, 1);
    _tile_dpbf16ps(4, 0, 2);
    _tile_dpbf16ps(4, 0, 3);
    MemoryBarrier();
    a_tiles.After(s);
  }
  _tile_stored(4, c, 64);
  MemoryBarrier();
}

// More than one block (n > 16): C tiles (tmm 4 + 2b + j) of panels j = 0, 1 (A: tmm0-1) against
// kBlocks blocks of activations from xb (16 rows wide; block b's B tile of each part in turn in
// tmm 2 + b, PanelPairProducts), stored to c in that order. Per part, four independent products (two with one block) reuse
// each loaded tile twice: a chain of products into one C tile waits for each product's result
// (one panel against one block, its three parts in a row, ran far below the tile peak on one
// core at n = 32). Each C tile still sums steps ascending, parts 0, 1, 2 within a step.
template <int kBlocks, class ATiles>
void MultiplyPanelPair(const ATiles& a_tiles, const uint32_t* xb, int64_t block_words, int64_t part_words,
                       int64_t steps, float* c) {
  MemoryBarrier();
  ZeroCTiles<2 * kBlocks>();
  for (int64_t s = 0; s < steps; ++s) {
    MemoryBarrier();
    _tile_loadd(0, a_tiles.Tile(0, s), a_tiles.Stride(0));
    _tile_loadd(1, a_tiles.Tile(1, s), a_tiles.Stride(1));
    for (int p = 0; p < kParts; ++p) PanelPairProducts<kBlocks>(xb + p * part_words + s * kTileWords, block_words);
    MemoryBarrier();
    a_tiles.After(s);
  }
  StoreCTiles<2 * kBlocks>(c);
  MemoryBarrier();
}

// y for the panel pair from o0 and the block pair from block b (one block where b is the last),
// from c (MultiplyPanelPair's order).
void ScatterPair(const MatMulArgs& a, const float* c, int64_t blocks, int64_t b, int64_t o0, int64_t r1) {
  for (int g = 0; g < std::min<int64_t>(2, blocks - b); ++g)
    for (int j = 0; j < 2; ++j)
      ScatterTile(a, c + (2 * g + j) * kTileWords, (b + g) * kBlock, o0 + j * kBlock, r1 - o0 - j * kBlock);
}

// Rows [r0, r1) against more than one block: panel pairs against block pairs. FP8 panels against
// one block pair are decoded as their products run (WithFp8Ring); against more, in full once and
// read by every pair.
void PairedRows(const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  const int64_t steps = a.cols / 32, width = BlockWidth(a.n), blocks = (a.n + kBlock - 1) / kBlock;
  const int64_t block_words = steps * 16 * width, part_words = blocks * block_words;
  const uint32_t* x = reinterpret_cast<const uint32_t*>(a.x);
  static_assert(kMaxPanels == 2 && kMaxCTiles >= 4, "AmxScratchFloats: two panels' tiles, then four C tiles");
  uint32_t* copies = reinterpret_cast<uint32_t*>(scratch);  // copies, or FP8's ring
  float* c = reinterpret_cast<float*>(copies + kMaxPanels * std::max<int64_t>(steps, kRing) * kTileWords);
  const auto pair = [&](const auto& tiles, int64_t b) {
    if (blocks - b >= 2) {
      MultiplyPanelPair<2>(tiles, x + b * block_words, block_words, part_words, steps, c);
    } else {
      MultiplyPanelPair<1>(tiles, x + b * block_words, block_words, part_words, steps, c);
    }
  };
  if (a.format == model::MatrixFormat::kFp8 && blocks <= 2) {
    WarmPanels(Fp8BitsRows{&a}, r0, 2);
    for (int64_t o0 = r0; o0 < r1; o0 += 2 * kBlock) {
      WithFp8Ring(a, o0, r1, 2, steps, copies, [&](const auto& tiles) { pair(tiles, 0); });
      ScatterPair(a, c, blocks, 0, o0, r1);
    }
    return;
  }
  for (int64_t o0 = r0; o0 < r1; o0 += 2 * kBlock) {
    const APanel panels[2] = {PanelAt(a, o0, steps, copies), PanelAt(a, o0 + kBlock, steps, copies + steps * kTileWords)};
    const uint8_t* next = RowsAhead(a, o0 + 2 * kBlock, 2);
    for (int64_t b = 0; b < blocks; b += 2) {
      // BF16 rows: the first pass requests the next pair's rows (FP8's decoder requests its own).
      pair(InPlaceTiles{{panels[0], panels[1]}, b == 0 ? next : nullptr, a.cols * 2, 2 * kBlock}, b);
      ScatterPair(a, c, blocks, b, o0, r1);
    }
  }
}

}  // namespace

void AmxSplitRows(const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  if (a.n > kBlock) {  // width 16: tmm1 holds a second A tile
    PairedRows(a, r0, r1, scratch);
    return;
  }
  // One block: its B tiles, each part's steps * width * 16 words after the one before.
  const int64_t steps = a.cols / 32, width = BlockWidth(a.n), part_words = steps * 16 * width;
  const uint32_t* x = reinterpret_cast<const uint32_t*>(a.x);
  uint32_t* copy = reinterpret_cast<uint32_t*>(scratch);  // a tail's copy, or FP8's ring
  float* c = reinterpret_cast<float*>(copy + std::max<int64_t>(steps, kRing) * kTileWords);
  const bool fp8 = a.format == model::MatrixFormat::kFp8;
  if (fp8) WarmPanels(Fp8BitsRows{&a}, r0, 1);
  for (int64_t o0 = r0; o0 < r1; o0 += kBlock) {
    const auto multiply = [&](const auto& tiles) { MultiplyBlock(tiles, x, part_words, width, steps, c); };
    if (fp8) {
      WithFp8Ring(a, o0, r1, 1, steps, copy, multiply);
    } else {
      const APanel panel = PanelAt(a, o0, steps, copy);
      multiply(InPlaceTiles{{panel, panel}, RowsAhead(a, o0 + kBlock, 1), a.cols * 2, kBlock});
    }
    ScatterTile(a, c, 0, o0, r1 - o0);
  }
}

void PackAmxSplitActivations(const float* x, int64_t ldx, const int32_t* rows, int64_t n, int64_t cols, int64_t b0,
                             int64_t b1, uint32_t* out) {
  FS_CHECK(reinterpret_cast<uintptr_t>(out) % 64 == 0, "AMX activation tiles must be 64-byte aligned");
  const int64_t steps = cols / 32, blocks = (n + kBlock - 1) / kBlock, width = BlockWidth(n);
  const auto parts = [&](int64_t i, int64_t s, __m512i* v) {
    const float* src = x + rows[i] * ldx + 32 * s;
    const Parts lo = Split(_mm512_loadu_ps(src)), hi = Split(_mm512_loadu_ps(src + 16));
    for (int p = 0; p < kParts; ++p) v[p] = HighHalves(lo.h[p], hi.h[p]);
  };
  PackBlocks<kParts>(n, steps, b0, b1, blocks * steps * 16 * width, parts, out);
}

}  // namespace flashserve::kernels::internal
