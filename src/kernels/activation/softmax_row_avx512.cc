// The AVX-512 ExpShiftedSum loop (activation/softmax_row.h): 16 values per step, one vector of
// lane sums, a masked last step. Compiled with AVX-512 flags.
#include <immintrin.h>

#include "kernels/simd/avx512.h"
#include "kernels/activation/softmax_row.h"

namespace flashserve::kernels::internal {

float RowMaxAvx512(const float* x, int64_t n) {
  __m512 top = _mm512_set1_ps(x[0]);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    top = _mm512_mask_max_ps(top, k, top, _mm512_maskz_loadu_ps(k, x + j));
  }
  return _mm512_reduce_max_ps(top);
}

float ExpShiftedSumAvx512(float* x, int64_t n, float scaled_max, float scale) {
  const __m512 s = _mm512_set1_ps(scale), m = _mm512_set1_ps(scaled_max);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + j);
    const __m512 e = simd::Avx512::Exp(_mm512_sub_ps(_mm512_mul_ps(v, s), m));
    _mm512_mask_storeu_ps(x + j, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, acc);
  return CombineLanes(lanes);
}

}  // namespace flashserve::kernels::internal
