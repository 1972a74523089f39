// The AVX2 SoftmaxPoolFold loop (activation/softmax_pool.h): 8 channels per step, the last few
// one at a time, the scalar loop's operations. Compiled with AVX2 + FMA flags.
#include <immintrin.h>

#include "kernels/activation/exp_avx2.h"
#include "kernels/activation/softmax_pool.h"

namespace flashserve::kernels::internal {

void SoftmaxPoolFoldAvx2(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 av = _mm256_loadu_ps(a + k), zv = _mm256_loadu_ps(z + k);
    const __m256 m = _mm256_loadu_ps(max + k), s = _mm256_loadu_ps(sum + k), w = _mm256_loadu_ps(wsum + k);
    const __m256 e = exp_vec::ExpF8(_mm256_or_ps(_mm256_sub_ps(zv, m), sign));  // e^-|z - max|
    const __m256 rises = _mm256_cmp_ps(zv, m, _CMP_GT_OQ);
    _mm256_storeu_ps(max + k, exp_vec::Where(rises, zv, m));
    _mm256_storeu_ps(sum + k, exp_vec::Where(rises, _mm256_add_ps(_mm256_mul_ps(s, e), one), _mm256_add_ps(s, e)));
    _mm256_storeu_ps(wsum + k, exp_vec::Where(rises, _mm256_add_ps(_mm256_mul_ps(w, e), av),
                                              _mm256_add_ps(w, _mm256_mul_ps(e, av))));
  }
  for (; k < n; ++k) exp_table::PoolFoldScalar(a[k], z[k], max[k], sum[k], wsum[k]);
}

}  // namespace flashserve::kernels::internal
