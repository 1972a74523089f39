// The dense products' register tiles and blocking as templates on ISA traits V (simd/avx512.h,
// simd/avx2.h, or the portable traits in dense.cc), instantiated once per ISA. A panel is
// 2 * V::kLanes columns wide; a tile is MR rows of it. Re-entrant; no state but per-thread scratch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/gemm/dense.h"
#include "kernels/gemm/dense_internal.h"

namespace flashserve::kernels::internal::dense {

// Rows [0, rows) of a tile of MR x 2L outputs: A's MR rows read in place (row stride lda; all MR
// readable), B a panel ([k][2L]); each output's FMA chain over k is written to C, or added to what
// C holds.
template <class V, int MR>
inline void Tile(const float* a, int64_t lda, const float* b, int64_t k, float* c, int64_t ldc, int rows, int cols,
                 bool accumulate) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F acc[MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = V::Zero();
  for (int64_t kk = 0; kk < k; ++kk) {
    const F b0 = V::Load(b + kk * 2 * L), b1 = V::Load(b + kk * 2 * L + L);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const F ai = V::Set1(a[i * lda + kk]);
      acc[i][0] = V::Fma(ai, b0, acc[i][0]);
      acc[i][1] = V::Fma(ai, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < rows; ++i) {
    float* ci = c + i * ldc;
    for (int h = 0; h < 2; ++h) {
      const int lanes = std::clamp(cols - h * L, 0, L);
      if (lanes == 0) continue;
      F v = acc[i][h];
      if (lanes == L) {
        if (accumulate) v = V::Add(V::Load(ci + h * L), v);
        V::Store(ci + h * L, v);
      } else {
        if (accumulate) v = V::Add(V::LoadPartial(ci + h * L, lanes), v);
        V::StorePartial(ci + h * L, v, lanes);
      }
    }
  }
}

// Rows of A in blocks of kMc (in L2), columns in blocks of kNc; each MR rows of A meet the
// block's panels in turn, over all of k at once. A block's last group of fewer than MR rows is
// copied once, zero-padded, so that tiles never read past A.
template <class V, int MR>
void Product(const float* a, int64_t m, int64_t lda, const float* packed, int64_t k, int64_t n, float* c, int64_t ldc,
             bool accumulate) {
  constexpr int64_t kNr = 2 * V::kLanes, kMc = 24 * MR, kNc = 256;
  thread_local std::vector<float> tail;
  for (int64_t i0 = 0; i0 < m; i0 += kMc) {
    const int64_t mc = std::min(kMc, m - i0), whole = mc / MR * MR;
    if (whole < mc) {
      tail.assign(static_cast<size_t>(MR * k), 0.0f);
      for (int64_t i = whole; i < mc; ++i) std::copy_n(a + (i0 + i) * lda, k, tail.data() + (i - whole) * k);
    }
    for (int64_t n0 = 0; n0 < n; n0 += kNc) {
      for (int64_t r = 0; r < mc; r += MR) {
        const bool partial = r == whole;
        const float* rows_a = partial ? tail.data() : a + (i0 + r) * lda;
        for (int64_t j0 = n0; j0 < std::min(n, n0 + kNc); j0 += kNr) {
          Tile<V, MR>(rows_a, partial ? k : lda, packed + j0 * k, k, c + (i0 + r) * ldc + j0, ldc,
                      static_cast<int>(std::min<int64_t>(MR, mc - r)), static_cast<int>(std::min(kNr, n - j0)),
                      accumulate);
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
