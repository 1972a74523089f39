// The AVX2 SwiGlu loop (activation/swiglu.h): ExpF in double lanes (4 per vector, the table by
// gather), the same operations as the scalar code, 8 values per step; the last few one at a
// time with the FMA instruction. Compiled with AVX2 + FMA flags.
#include <immintrin.h>

#include <cmath>

#include "kernels/activation/exp_avx2.h"
#include "kernels/activation/swiglu.h"

namespace flashserve::kernels::internal {

void SwiGluAvx2(const float* gate, const float* up, int64_t n, float limit, float weight, float* out) {
  const __m256 lim = _mm256_set1_ps(limit), neg_lim = _mm256_set1_ps(-limit), w = _mm256_set1_ps(weight);
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
    if (limit > 0.0f) {
      g = _mm256_min_ps(lim, g);  // std::min(g, limit): g where either is NaN
      u = _mm256_min_ps(lim, _mm256_max_ps(neg_lim, u));  // std::clamp(u, -limit, limit)
    }
    const __m256 e = exp_vec::ExpF8(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(w, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u)));
  }
  for (; i < n; ++i) out[i] = exp_table::SwiGluScalar(gate[i], up[i], limit, weight);
}

}  // namespace flashserve::kernels::internal
