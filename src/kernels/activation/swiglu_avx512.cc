// The AVX-512 SwiGlu loop (activation/swiglu.h): ExpF in double lanes, the same operations as
// the scalar code, 16 values per step (a masked last step). Compiled with AVX-512 flags.
#include <immintrin.h>

#include <cmath>

#include "kernels/activation/exp_avx512.h"
#include "kernels/activation/swiglu.h"

namespace flashserve::kernels::internal {

void SwiGluAvx512(const float* gate, const float* up, int64_t n, float limit, float weight, float* out) {
  const __m512 lim = _mm512_set1_ps(limit), neg_lim = _mm512_set1_ps(-limit), w = _mm512_set1_ps(weight);
  const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
    if (limit > 0.0f) {
      g = _mm512_min_ps(lim, g);  // std::min(g, limit): g where either is NaN
      u = _mm512_min_ps(lim, _mm512_max_ps(neg_lim, u));  // std::clamp(u, -limit, limit)
    }
    const __m512 e = exp_vec::ExpF16(_mm512_xor_ps(g, sign));
    const __m512 act = _mm512_mul_ps(w, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    _mm512_mask_storeu_ps(out + i, m, act);
  }
}

}  // namespace flashserve::kernels::internal
