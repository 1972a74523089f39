// What the AMX matrix-product files share (matmul_amx.cc, matmul_amx_split.cc): the tile shapes
// and configuration, activations packed into B tiles (PackBlocks), a panel pair's products
// against one or two blocks (PanelPairProducts), the C tiles zeroed, stored and scattered into
// y, alignment. Internal linkage: included only by files built with AMX flags. Re-entrant; no
// state.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm/matmul_internal.h"

namespace flashserve::kernels::internal {
namespace {  // internal linkage: each including file gets its own copy, built with its flags

constexpr int kBlock = 16;       // weight rows per A tile; activation rows per B and C tile
constexpr int kTileWords = 256;  // 32-bit words per tile: 16 rows of 64 bytes

// The asm of the tile loads and the TDPBF16PS macros declares no memory operands: a barrier
// keeps every store to a panel or to the packed activations before the loads that read it, and
// a ring slot's next decode after the loads of its previous contents.
inline void MemoryBarrier() { asm volatile("" ::: "memory"); }

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Activation rows per B and C tile: all of them below 16 (one narrow block), else 16. Narrow B
// tiles keep a decode's working set in L1 (n = 1: 2 KiB of activation tiles, not 32, beside
// the FP4 tables' 16 KiB and the ring's 4 KiB per panel).
inline int64_t BlockWidth(int64_t n) { return std::min<int64_t>(n, kBlock); }

// Every tile 16 rows: A (weights, 16 rows x 32 BF16: 64 bytes), B (activations, 16 pairs of
// columns x `width` activation rows), C (16 weight rows x `width` activation rows, f32). FP4/FP8
// (matmul_amx.cc): one block: A in tmm0, B in tmm3, C in tmm4; more (width 16): A in tmm0-1, B
// in tmm2-3, C in tmm4-7.
// Split activations (matmul_amx_split.cc): one block: A in tmm0, B in tmm1-3, C in tmm4; more
// (width 16, every tile 64 bytes wide): A in tmm0-1, B in tmm2-3, C in tmm4-7.
inline void ConfigureTiles(int64_t width, bool split) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = static_cast<uint16_t>(t >= (split ? 1 : 3) ? 4 * width : 64);
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

// 32 activations' BF16 values (the high halves of lo's and hi's f32 bits) in column order: word
// j is column j, so pair p holds columns 2p (low half) and 2p + 1, as the weights' A tile rows.
inline __m512i HighHalves(__m512 lo, __m512 hi) {
  alignas(64) static constexpr uint16_t kOdd[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                                    33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  return _mm512_permutex2var_epi16(_mm512_castps_si512(lo), _mm512_load_si512(kOdd), _mm512_castps_si512(hi));
}

// 32 activations' BF16 values (the high halves of lo's and hi's f32 bits) in FP4 pair order
// (PackBf16PairsAvx512's): pair c holds column 2c in its high half and 2c + 1 in its low half,
// as the FP4 decoders' A tile rows. One permutation, where a call per row and step cost n = 16
// products of FP4 768 x 1024 a fifth of their time.
inline __m512i Fp4PairHalves(__m512 lo, __m512 hi) {
  // Word 2c is the high half of column 2c + 1 (word 4c + 3 of lo:hi), word 2c + 1 that of 2c.
  alignas(64) static constexpr uint16_t kPairs[32] = {3,  1,  7,  5,  11, 9,  15, 13, 19, 17, 23, 21, 27, 25, 31, 29,
                                                      35, 33, 39, 37, 43, 41, 47, 45, 51, 49, 55, 53, 59, 57, 63, 61};
  return _mm512_permutex2var_epi16(_mm512_castps_si512(lo), _mm512_load_si512(kPairs), _mm512_castps_si512(hi));
}

// Transposes 16 vectors of 16 words in place: afterwards r[q] word i is what r[i] word q was
// (a B tile of 16 activation rows from one vector of pairs per row: 64 shuffles, against 16
// scatters of 16 words).
inline void Transpose16(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {  // lane L of t[2i]: words 4L, 4L + 1 of rows 2i, 2i + 1, interleaved
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // lane L of r[4i + c]: word 4L + c of rows 4i .. 4i + 3
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // word 4L + c of every row: lane L of r[c], r[4 + c], r[8 + c], r[12 + c]
    const __m512i ab_lo = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44), ab_hi = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
    const __m512i de_lo = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44),
                  de_hi = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_shuffle_i32x4(ab_lo, de_lo, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(ab_lo, de_lo, 0xDD);
    t[8 + c] = _mm512_shuffle_i32x4(ab_hi, de_hi, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(ab_hi, de_hi, 0xDD);
  }
  for (int q = 0; q < 16; ++q) r[q] = t[q];
}

// Blocks [b0, b1) of n activation rows as B tiles of kSets sets, set p's tiles p * set_words
// words after the first (block b's b * steps tiles after its set's start): row_pairs(i, s, v)
// gives row i's pairs [16 s, 16 s + 16) of each set in v[0 .. kSets). A full block's 16 rows
// are transposed into each step's tile; a partial one (fewer rows, narrower tiles of `width`
// words) is zeroed, then its rows scattered. Blocks are disjoint, so threads may pack them side
// by side.
template <int kSets, class RowPairs>
void PackBlocks(int64_t n, int64_t steps, int64_t b0, int64_t b1, int64_t set_words, const RowPairs& row_pairs,
                uint32_t* out) {
  const int64_t width = BlockWidth(n), tile_words = 16 * width, block_words = steps * tile_words;
  const __m512i pair_rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(static_cast<int>(width)));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t i0 = b * kBlock, count = std::min<int64_t>(kBlock, n - i0);
    uint32_t* block = out + b * block_words;
    if (count == kBlock) {
      for (int64_t s = 0; s < steps; ++s) {
        __m512i stage[kSets][16], v[kSets];
        for (int i = 0; i < 16; ++i) {
          row_pairs(i0 + i, s, v);
          for (int p = 0; p < kSets; ++p) stage[p][i] = v[p];
        }
        for (int p = 0; p < kSets; ++p) {
          Transpose16(stage[p]);
          uint32_t* tile = block + p * set_words + s * tile_words;
          for (int q = 0; q < 16; ++q) _mm512_store_si512(tile + 16 * q, stage[p][q]);
        }
      }
      continue;
    }
    for (int p = 0; p < kSets; ++p) std::memset(block + p * set_words, 0, sizeof(uint32_t) * block_words);
    __m512i v[kSets];
    for (int64_t i = i0; i < i0 + count; ++i)
      for (int64_t s = 0; s < steps; ++s) {
        row_pairs(i, s, v);
        for (int p = 0; p < kSets; ++p)
          _mm512_i32scatter_epi32(block + p * set_words + s * tile_words + i % kBlock, pair_rows, v[p], 4);
      }
  }
}

// Zeroes the C tiles tmm4 .. tmm(3 + kTiles) (1, 2 or 4: the panel-pair kernels' layouts).
template <int kTiles>
inline void ZeroCTiles() {
  static_assert(kTiles == 1 || kTiles == 2 || kTiles == 4);
  _tile_zero(4);
  if constexpr (kTiles > 1) _tile_zero(5);
  if constexpr (kTiles > 2) {
    _tile_zero(6);
    _tile_zero(7);
  }
}

// The products of the A tiles in tmm0-1 (two weight panels) with kBlocks B tiles of 16
// activation rows (64-byte rows), b's in tmm2 and, with two blocks, b + block_words's in tmm3,
// accumulated into the C tile of panel j and block g, tmm(4 + 2g + j): each loaded B tile feeds
// two independent products.
template <int kBlocks>
inline void PanelPairProducts(const uint32_t* b, int64_t block_words) {
  static_assert(kBlocks == 1 || kBlocks == 2);
  _tile_loadd(2, b, 64);
  _tile_dpbf16ps(4, 0, 2);
  _tile_dpbf16ps(5, 1, 2);
  if constexpr (kBlocks > 1) {
    _tile_loadd(3, b + block_words, 64);
    _tile_dpbf16ps(6, 0, 3);
    _tile_dpbf16ps(7, 1, 3);
  }
}

// Stores the C tiles tmm4 .. tmm(3 + kTiles) to c, one after another.
template <int kTiles>
inline void StoreCTiles(float* c) {
  static_assert(kTiles == 1 || kTiles == 2 || kTiles == 4);
  _tile_stored(4, c, 64);
  if constexpr (kTiles > 1) _tile_stored(5, c + kTileWords, 64);
  if constexpr (kTiles > 2) {
    _tile_stored(6, c + 2 * kTileWords, 64);
    _tile_stored(7, c + 3 * kTileWords, 64);
  }
}

// y[rows[i], o0 + m] = tile[m][i - i0] for the activation rows of the block from i0, the
// weight rows [o0, o0 + count).
inline void ScatterTile(const MatMulArgs& a, const float* tile, int64_t i0, int64_t o0, int64_t count) {
  if (count <= 0) return;
  const __m512i column = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(kBlock));
  const __mmask16 valid = static_cast<__mmask16>((1u << std::min<int64_t>(count, kBlock)) - 1);
  const int64_t i1 = std::min(a.n, i0 + kBlock);
  for (int64_t i = i0; i < i1; ++i) {
    const __m512 v = _mm512_i32gather_ps(column, tile + (i - i0), 4);
    _mm512_mask_storeu_ps(a.y + a.amx_rows[i] * a.ldy + o0, valid, v);
  }
}

}  // namespace
}  // namespace flashserve::kernels::internal
