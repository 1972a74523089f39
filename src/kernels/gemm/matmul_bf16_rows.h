// The BF16 weight decoders of the AVX-512 BF16 and AMX matrix products, as internal-linkage
// code included only by translation units built with AVX512-BF16 and AVX512-VBMI flags
// (matmul_avx512_bf16.cc, matmul_amx.cc): FP4 and FP8 rows decoded in registers into BF16
// pairs, BF16 rows rearranged into them (one 32-bit lane per two columns, the one the f32 path
// adds first in the high half), the register-tile shapes, VDPBF16PS, and the packing of two f32
// vectors into pairs.
// Re-entrant; no state.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/gemm/matmul_rows.h"
#include "kernels/gemm/matmul_simd.h"
#include "kernels/simd/avx512.h"
#include "model/matrix.h"

namespace flashserve::kernels::internal {
namespace {  // internal linkage: each including file gets its own copy, built with its flags

struct Tiles : simd::Avx512 {
  static constexpr int kWideMr = 8;  // as in matmul_avx512.cc
  static constexpr int kWideNr = 3;
  static constexpr int kMaxMr = 4;
  static constexpr int kSingleNr = 8;
  // Weight rows per tile for 1-4 activation rows (gemm::NarrowNr): wider than the f32 paths' 4,
  // since a dot product covers two columns per lane. On Zen 5 (one core, FP4 768 x 1024 in L2)
  // these beat 4 rows at n = 2, 3 and 4, and 2 x 12 and 3 x 8 were slower (docs/benchmarks.md).
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
  // beside the two broadcast loads (faster than kWidened at n = 1..4), but in the FMA pipes.
  kMultishift,
  // VPMOVZXBD, two shifts and a merge: two more operations, none in the FMA pipes, which the
  // wide tiles (5-8 rows) fill with their dot products (faster than kMultishift at n = 8).
  kWidened,
  // Data in model::Fp4Layout::kLanePairs: a 128-bit broadcast load and one shift per dword
  // (simd::Avx512::Fp4LanePairCodes), beside the dot products in the pipes (on Zen 4
  // VPMULTISHIFTQB competes with VDPBF16PS for them, VPSRLVD does not).
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
  // than on decoding (medium, batch 8: a shorter experts phase; batch 1 the same within noise;
  // docs/benchmarks.md). The same lead for every product slowed batch 1 and 32.
  static constexpr uintptr_t kPrefetchLead = 8192;
  static constexpr bool kScalesX = false;
  // 2: more than 8 rows go in passes of 8 (8 x 3 tiles), not of 4 (4 x 6): faster on Zen 5 (one
  // core, 768 x 1024 in L2) at n = 16, 32 and 48, about even at n = 12 (two passes of 6 x 3).
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
  // 21 two (the other two stay memory operands), wider ones load per row. Measured on Zen 4
  // (one thread, FP8 768 x 1024 DRAM-cold): sharing is faster at n = 5..7; at n = 8 (24
  // accumulators) sharing even two quarters was slower, so it loads per row as before.
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

// Rows of a BF16 matrix (cols a multiple of 32) rearranged in registers into pairs: pair l of
// each 32 columns g is columns g + l (high half) and g + 16 + l, as in Fp8PairRows, so that
// lane l adds column g + l, then g + 16 + l: the order of the f32 path's 16-lane steps
// (gemm::Half16Rows). One VPERMW per 32 weights, where the f32 path widens and shifts twice.
struct Bf16PairRows {
  using F = __m512;
  static constexpr int kStep = 16;  // pair columns per Load: 32 columns, 64 bytes
  static constexpr int kStepBytes = 64;
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = 1;
  static F Dot(F w, F x, F acc) { return DotPairs(w, x, acc); }
  // VPERMW control: word 2l + 1 (the high half of lane l) is element l, word 2l element 16 + l.
  static __m512i Spread() {
    alignas(64) static constexpr uint16_t kSpread[32] = {16, 0, 17, 1, 18, 2, 19, 3, 20, 4, 21, 5, 22, 6, 23, 7,
                                                        24, 8, 25, 9, 26, 10, 27, 11, 28, 12, 29, 13, 30, 14, 31, 15};
    return _mm512_load_si512(kSpread);
  }
  struct Cursor {
    const uint16_t* p;
    void Load(int64_t k, F* w) const {
      w[0] = _mm512_castsi512_ps(_mm512_permutexvar_epi16(Spread(), _mm512_loadu_si512(p + 2 * k)));
    }
    void Tail(int64_t, int, F* w) const { w[0] = _mm512_setzero_ps(); }  // cols % 32 == 0: never
  };
  const MatMulArgs* a;
  Cursor Row(int64_t r) const { return {reinterpret_cast<const uint16_t*>(a->data) + r * a->cols}; }
  const uint8_t* RowStart(int64_t r) const { return a->data + (r < a->rows ? r : a->rows) * a->cols * 2; }
  int64_t RowBytes() const { return a->cols * 2; }
};

// Two vectors of exact BF16 values (f32) -> one of pairs: lane l = hi[l] (high half), lo[l].
inline __m512i Pack(__m512 hi, __m512 lo) {
  return _mm512_ternarylogic_epi32(_mm512_castps_si512(hi), _mm512_srli_epi32(_mm512_castps_si512(lo), 16),
                                   _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)), 0xE4);  // (a & c) | (b & ~c)
}

}  // namespace
}  // namespace flashserve::kernels::internal
