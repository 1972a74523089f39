// Horizontal sums of a register tile of accumulators, stored: simd::StoreSums, a template on
// the ISA traits (simd/avx2.h, simd/avx512.h), shared by the matrix-product tiles
// (gemm/matmul_simd.h) and the attention logit tiles (attention/sink_attention_simd.h). Each
// sum is V::Sum's fixed tree, whichever way it is computed. Re-entrant; no state.
#pragma once

#include <cstdint>

namespace flashserve::kernels::simd {

// ys[i][o0 + j] = V::Sum(acc[i][j]). Where the traits have Sums (the same trees for kLanes
// vectors at once), groups of at least 3/4 kLanes accumulators take it, zero-padded (measured
// faster on Zen 4, BF16 4 x 4 tiles in L2, with the tile loops unrolled; smaller groups keep
// separate trees, which use fewer shuffle slots where decoding already fills them).
template <class V, int MR, int NR>
inline void StoreSums(const typename V::F (&acc)[MR][NR], float* const* ys, int64_t o0) {
  using F = typename V::F;
  constexpr int L = V::kLanes, kCount = MR * NR;
  int k = 0;
  if constexpr (requires(const F* v) { V::Sums(v); }) {
#pragma GCC unroll 4
    for (; k + 3 * L / 4 <= kCount; k += L) {
      F v[L];
#pragma GCC unroll 16
      for (int t = 0; t < L; ++t) v[t] = k + t < kCount ? acc[(k + t) / NR][(k + t) % NR] : V::Zero();
      alignas(64) float sums[L];
      V::Store(sums, V::Sums(v));
#pragma GCC unroll 16
      for (int t = 0; t < L; ++t)
        if (k + t < kCount) ys[(k + t) / NR][o0 + (k + t) % NR] = sums[t];
    }
  }
#pragma GCC unroll 16
  for (; k < kCount; ++k) ys[k / NR][o0 + k % NR] = V::Sum(acc[k / NR][k % NR]);
}

}  // namespace flashserve::kernels::simd
