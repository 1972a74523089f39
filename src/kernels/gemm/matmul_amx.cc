// Matrix products on AMX tiles (TDPBF16PS) for activation rows that are exact BF16 values (the
// QAT emulation's FP8-rounded ones): FP4 and FP8 weights decoded exactly into BF16 (code times a
// power-of-two scale; the decoders of matmul_amx_decode.h) 16 rows at a time into A tiles,
// activations packed once per call into B tiles (up to 16 rows each), products accumulated in C
// tiles; BF16 weights, and FP8 rows with other activations (split), go to matmul_amx_split.cc,
// which decodes FP8 with the same decoders. Called
// by the dispatcher (matmul.cc) after its CPU check; compiled with AMX, AVX512-BF16 and
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
#include "kernels/gemm/matmul_amx_decode.h"

namespace flashserve::kernels::internal {
namespace {

// Panels decoded in full beforehand.
struct WholePanels {
  const uint32_t* panels;
  const uint32_t* Tiles(int64_t s) const { return panels + s * kTileWords; }
  void After(int64_t) const {}
};

// One activation block: one weight panel (A: tmm0) against it (B: tmm3), C in tmm4. One chain
// of products into one C tile runs at the unit's full rate here (as fast as four independent
// chains), and three panels decoded side by side ran slower at n = 1 (FP8 8192 x 512, one core:
// the 48 rows' streams miss more).
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
    _tile_loadd(0, a, 64);
    _tile_loadd(1, a + panel_stride, 64);
    PanelPairProducts<kBlocks>(xb + s * kTileWords, x_stride);
    MemoryBarrier();
    a_panels.After(s);
  }
  StoreCTiles<2 * kBlocks>(out);
  MemoryBarrier();
}

// Weight rows [r0, r1) against every activation block: with one block (n <= 16), panels of 16
// rows; with more, panels of 32 rows against pairs of blocks (2 x 2 C tiles). Up to two blocks,
// each step's tiles are decoded a few steps before their products, into a ring of kRing slots
// that stays in L1 (StreamedPanels); more blocks read a whole decoded panel (in L2) once per
// pair of blocks, decoded as the first pair's products run (PanelsDecodedAhead).
template <class Src>
void Run(const Src& src, const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  const int64_t steps = a.cols / 32, width = BlockWidth(a.n), x_stride = steps * 16 * width;
  const int64_t blocks = (a.n + kBlock - 1) / kBlock;
  const int panels = blocks == 1 ? 1 : 2;
  uint32_t* buffer = reinterpret_cast<uint32_t*>(scratch);  // on a cache line (MatMulRowsAmx): tile rows too
  float* c = reinterpret_cast<float*>(buffer + kMaxPanels * std::max<int64_t>(steps, kRing) * kTileWords);
  const uint32_t* x = reinterpret_cast<const uint32_t*>(a.x);
  WarmPanels(src, r0, panels);
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
      // The first pass (two blocks: there are more) decodes the panels as its products run.
      const auto generic = [&decoder](int64_t s, uint32_t* tiles, int64_t stride) { decoder.Decode(s, tiles, stride); };
      const PanelsDecodedAhead<decltype(generic)> first(generic, steps, steps * kTileWords, buffer);
      const WholePanels whole{buffer};
      for (int64_t b = 0; b < blocks; b += 2) {
        const int group = blocks - b >= 2 ? 2 : 1;
        if (b == 0) {
          MultiplyTwoPanels<2>(first, steps * kTileWords, x, x_stride, steps, c);
        } else if (group == 2) {
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

int64_t AmxScratchFloats(int64_t cols) {
  return (kMaxPanels * std::max<int64_t>(cols / 32, kRing) + kMaxCTiles) * kTileWords;
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
    if (b0 >= b1) return;
    for (int64_t s = 0; s < steps; ++s) pairs(0, s, reinterpret_cast<__m512i*>(out + 16 * s));
    return;
  }
  PackBlocks<1>(n, steps, b0, b1, 0, pairs, out);
}

void MatMulRowsAmx(const MatMulArgs& a, const std::function<bool(int64_t*, int64_t*)>& next_rows, float* scratch) {
  // Tile rows that straddle two cache lines load at a fraction of the rate (FP4 768 x 1024 at
  // n = 1 on one core, from a buffer aligned to only 16 bytes): AmxScratch is an AlignedVector.
  FS_CHECK(reinterpret_cast<uintptr_t>(scratch) % 64 == 0, "AMX scratch must be 64-byte aligned");
  const bool split = a.amx_split;
  ConfigureTiles(BlockWidth(a.n), split);  // once per thread and call: cheap, with its release
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
