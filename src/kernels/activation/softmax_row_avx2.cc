// The AVX2 ExpShiftedSum loop (activation/softmax_row.h): 16 values per step as two vectors of
// lane sums (lanes 0-7 and 8-15); the last values one at a time into the same lanes. Compiled
// with AVX2 + FMA flags.
#include <immintrin.h>

#include "kernels/simd/avx2.h"
#include "kernels/activation/softmax_row.h"

namespace flashserve::kernels::internal {

float RowMaxAvx2(const float* x, int64_t n) {
  __m256 top = _mm256_set1_ps(x[0]);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) top = _mm256_max_ps(top, _mm256_loadu_ps(x + j));
  float lanes[8];
  _mm256_storeu_ps(lanes, top);
  float best = lanes[0];
  for (float v : lanes) best = v > best ? v : best;
  for (; j < n; ++j) best = x[j] > best ? x[j] : best;
  return best;
}

float ExpShiftedSumAvx2(float* x, int64_t n, float scaled_max, float scale) {
  const __m256 s = _mm256_set1_ps(scale), m = _mm256_set1_ps(scaled_max);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 a = simd::Avx2::Exp(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), s), m));
    const __m256 b = simd::Avx2::Exp(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8), s), m));
    _mm256_storeu_ps(x + j, a);
    _mm256_storeu_ps(x + j + 8, b);
    lo = _mm256_add_ps(lo, a);
    hi = _mm256_add_ps(hi, b);
  }
  float lanes[16];
  _mm256_storeu_ps(lanes, lo);
  _mm256_storeu_ps(lanes + 8, hi);
  ExpShiftedScalar(x, j, n, scaled_max, scale, lanes);
  return CombineLanes(lanes);
}

}  // namespace flashserve::kernels::internal
