// The AVX-512 SoftmaxPoolFold loop (activation/softmax_pool.h): 16 channels per step (a masked
// last step), the scalar loop's operations. Compiled with AVX-512 flags.
#include <immintrin.h>

#include "kernels/activation/exp_avx512.h"
#include "kernels/activation/softmax_pool.h"

namespace flashserve::kernels::internal {

void SoftmaxPoolFoldAvx512(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum) {
  const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
  for (int64_t k = 0; k < n; k += 16) {
    const __mmask16 live = n - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - k)) - 1);
    const __m512 av = _mm512_maskz_loadu_ps(live, a + k), zv = _mm512_maskz_loadu_ps(live, z + k);
    const __m512 m = _mm512_maskz_loadu_ps(live, max + k), s = _mm512_maskz_loadu_ps(live, sum + k);
    const __m512 w = _mm512_maskz_loadu_ps(live, wsum + k);
    const __m512 e = exp_vec::ExpF16(_mm512_or_ps(_mm512_sub_ps(zv, m), sign));  // e^-|z - max|
    const __mmask16 rises = _mm512_cmp_ps_mask(zv, m, _CMP_GT_OQ);
    const __m512 s_new = _mm512_mask_blend_ps(rises, _mm512_add_ps(s, e), _mm512_add_ps(_mm512_mul_ps(s, e), one));
    const __m512 w_new =
        _mm512_mask_blend_ps(rises, _mm512_add_ps(w, _mm512_mul_ps(e, av)), _mm512_add_ps(_mm512_mul_ps(w, e), av));
    _mm512_mask_storeu_ps(max + k, live, _mm512_mask_blend_ps(rises, m, zv));
    _mm512_mask_storeu_ps(sum + k, live, s_new);
    _mm512_mask_storeu_ps(wsum + k, live, w_new);
  }
}

}  // namespace flashserve::kernels::internal
