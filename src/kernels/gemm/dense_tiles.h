// The dense products' register tiles and blocking as templates on ISA traits V (simd/avx512.h,
// simd/avx2.h, or the portable traits in dense.cc), instantiated once per ISA. A panel is
// 2 * V::kLanes columns wide; a tile is MR rows of it. Re-entrant; no state but per-thread scratch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "kernels/gemm/dense.h"
#include "kernels/gemm/dense_internal.h"

namespace flashserve::kernels::internal::dense {

// Where a tile's chains start and end: from zero or from `from` (a partial chain stored by the
// previous k block), into `to`, written or (add) added to what `to` holds.
struct TileEnds {
  const float* from = nullptr;  // nullptr: zero
  int64_t ld_from = 0;
  float* to = nullptr;
  int64_t ld_to = 0;
  bool add = false;
};

// The first `cols` of a 2L-wide row, or zero.
template <class V>
inline void LoadRow(const float* p, int cols, typename V::F& lo, typename V::F& hi) {
  constexpr int L = V::kLanes;
  lo = cols >= L ? V::Load(p) : V::LoadPartial(p, cols);
  hi = cols >= 2 * L ? V::Load(p + L) : (cols > L ? V::LoadPartial(p + L, cols - L) : V::Zero());
}

template <class V>
inline void StoreRow(float* p, int cols, typename V::F v, int h) {
  constexpr int L = V::kLanes;
  const int lanes = std::clamp(cols - h * L, 0, L);
  if (lanes == L) {
    V::Store(p + h * L, v);
  } else if (lanes > 0) {
    V::StorePartial(p + h * L, v, lanes);
  }
}

// `rows` x `cols` outputs of an MR x 2L tile over kc steps: A's element (i, kk) at
// a[i * row_step + kk * k_step] (all MR rows readable), B a panel slice [kc][2L]. Each output's
// FMA chain continues from `ends.from` (exactly the float a previous block stored, so blocking
// never changes a bit).
template <class V, int MR>
inline void Tile(const float* a, int64_t row_step, int64_t k_step, const float* b, int64_t kc, const TileEnds& ends,
                 int rows, int cols) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F acc[MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = V::Zero();
  if (ends.from != nullptr) {
    for (int i = 0; i < rows; ++i) LoadRow<V>(ends.from + i * ends.ld_from, cols, acc[i][0], acc[i][1]);
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const F b0 = V::Load(b + kk * 2 * L), b1 = V::Load(b + kk * 2 * L + L);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const F ai = V::Set1(a[i * row_step + kk * k_step]);
      acc[i][0] = V::Fma(ai, b0, acc[i][0]);
      acc[i][1] = V::Fma(ai, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < rows; ++i) {
    float* out = ends.to + i * ends.ld_to;
    F lo = acc[i][0], hi = acc[i][1];
    if (ends.add) {
      F c0, c1;
      LoadRow<V>(out, cols, c0, c1);
      lo = V::Add(c0, lo);
      hi = V::Add(c1, hi);
    }
    StoreRow<V>(out, cols, lo, 0);
    StoreRow<V>(out, cols, hi, 1);
  }
}

// The mc rows of A from `a` (row stride lda), columns [k0, k0 + kc), into MR-row tiles laid out
// [tile][kc][MR], rows past mc zero.
template <int MR>
void PackRows(const float* a, int64_t lda, int64_t mc, int64_t k0, int64_t kc, float* packed) {
  for (int64_t t = 0; t * MR < mc; ++t) {
    float* dst = packed + t * kc * MR;
    for (int i = 0; i < MR; ++i) {
      const int64_t row = t * MR + i;
      if (row < mc) {
        const float* src = a + row * lda + k0;
        for (int64_t kk = 0; kk < kc; ++kk) dst[kk * MR + i] = src[kk];
      } else {
        for (int64_t kk = 0; kk < kc; ++kk) dst[kk * MR + i] = 0.0f;
      }
    }
  }
}

// A tile's ends in one k block: the chains start from zero in the first block, else from the
// partial sums; they end in C in the last block (added when accumulating), else in the sums.
inline TileEnds BlockEnds(bool first, bool last, bool accumulate, float* sums, int64_t ld_sums, float* c,
                          int64_t ldc) {
  TileEnds ends;
  if (!first) {
    ends.from = sums;
    ends.ld_from = ld_sums;
  }
  ends.to = last ? c : sums;
  ends.ld_to = last ? ldc : ld_sums;
  ends.add = last && accumulate;
  return ends;
}

// A's rows are read in place where n is too narrow to repay packing them (attention's value
// products: each packed element would meet only a couple of panels).
inline constexpr int64_t kPackRowsFromPanels = 4;

// Blocking (GotoBLAS order): rows in blocks of mc, k in blocks of kKc. Per block the rows are
// packed once (mc chosen so that they stay in L2); each panel's slice (in L1 and L2) then meets
// every tile of the block. The chains run across k blocks through C itself, or, when
// accumulating over several k blocks, through per-thread partial sums added to C after the last.
template <class V, int MR>
void Product(const float* a, int64_t m, int64_t lda, const float* packed, int64_t k, int64_t n, float* c, int64_t ldc,
             bool accumulate) {
  constexpr int64_t kNr = 2 * V::kLanes, kKc = 1024, kPackedBytes = 512 * 1024;
  thread_local base::AlignedVector<float> a_packed, partial;
  const bool via_partial = accumulate && k > kKc;
  const bool pack = n > kPackRowsFromPanels * kNr;
  const int64_t kMc = std::max<int64_t>(MR, kPackedBytes / (4 * std::min(k, kKc)) / MR * MR);
  for (int64_t i0 = 0; i0 < m; i0 += kMc) {
    const int64_t mc = std::min(kMc, m - i0), tiles = (mc + MR - 1) / MR, whole = mc / MR;
    float* sums = c + i0 * ldc;
    int64_t ld_sums = ldc;
    if (via_partial) {
      if (static_cast<int64_t>(partial.size()) < mc * n) partial.resize(static_cast<size_t>(mc * n));
      sums = partial.data();
      ld_sums = n;
    }
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      const bool first = k0 == 0, last = k0 + kc == k;
      // Packed: every tile. In place: only a last tile of fewer than MR rows (zero-padded).
      const int64_t packed_tiles = pack ? tiles : tiles - whole;
      if (static_cast<int64_t>(a_packed.size()) < packed_tiles * MR * kc) {
        a_packed.resize(static_cast<size_t>(packed_tiles * MR * kc));
      }
      const int64_t first_packed = pack ? 0 : whole;  // the tile a_packed starts with
      if (packed_tiles > 0) {
        PackRows<MR>(a + (i0 + first_packed * MR) * lda, lda, mc - first_packed * MR, k0, kc, a_packed.data());
      }
      for (int64_t j0 = 0; j0 < n; j0 += kNr) {
        const float* panel = packed + j0 * k + k0 * kNr;
        const int cols = static_cast<int>(std::min(kNr, n - j0));
        for (int64_t t = 0; t < tiles; ++t) {
          const TileEnds ends = BlockEnds(first, last, accumulate, sums + t * MR * ld_sums + j0, ld_sums,
                                          c + (i0 + t * MR) * ldc + j0, ldc);
          const int rows = static_cast<int>(std::min<int64_t>(MR, mc - t * MR));
          if (pack || t == whole) {
            Tile<V, MR>(a_packed.data() + (t - first_packed) * MR * kc, 1, MR, panel, kc, ends, rows, cols);
          } else {
            Tile<V, MR>(a + (i0 + t * MR) * lda + k0, lda, 1, panel, kc, ends, rows, cols);
          }
        }
      }
    }
  }
}

// The entry point of one ISA's traits and tile height.
template <class V, int MR>
DenseKernel Kernel() {
  return {2 * V::kLanes, MR, &Product<V, MR>};
}

}  // namespace flashserve::kernels::internal::dense
