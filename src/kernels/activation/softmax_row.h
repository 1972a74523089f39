// The exponentials of one attention row: x[j] <- e^(x[j] * scale - max_k(x[k]) * scale), and
// their sum, vectorised (the vision tower's full attention, where these are n^2 per head). e^x
// is the vector traits' Exp (simd/avx512.h: Cody-Waite reduction, Taylor polynomial to r^7 in
// FMA steps, times 2^n; about 2 ulp), TaylorExp in scalar code with the same operations. The
// sum has one fixed order on every ISA: 16 running lanes (lane l adds the j = l mod 16 values
// in increasing j), then a fixed pairwise tree, so every ISA gives the scalar loop's bits.
// Pure functions, any thread.
#pragma once

#include <cstdint>

namespace flashserve::kernels {

// scale > 0; n >= 1. Returns the sum of the new x[j].
float ExpShiftedSum(float* x, int64_t n, float scale);

namespace internal {
// The largest x[j] (NaN-free rows), vectorised.
float RowMaxAvx512(const float* x, int64_t n);
float RowMaxAvx2(const float* x, int64_t n);
float ExpShiftedSumAvx512(float* x, int64_t n, float scaled_max, float scale);
float ExpShiftedSumAvx2(float* x, int64_t n, float scaled_max, float scale);
// Exp of the vector traits in scalar code (x <= 0 in use).
float TaylorExp(float x);
// The scalar loop from element `from` on, continuing `lanes` (16 running sums).
void ExpShiftedScalar(float* x, int64_t from, int64_t n, float scaled_max, float scale, float* lanes);
float CombineLanes(const float* lanes);  // the fixed tree over 16 lanes
}  // namespace internal

}  // namespace flashserve::kernels
