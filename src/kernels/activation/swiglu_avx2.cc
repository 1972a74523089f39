// The AVX2 SwiGlu loop (activation/swiglu.h): ExpF in double lanes (4 per vector, the table by
// gather), the same operations as the scalar code, 8 values per step; the last few one at a
// time with the FMA instruction. Compiled with AVX2 + FMA flags.
#include <immintrin.h>

#include <cmath>

#include "kernels/activation/exp_table.h"
#include "kernels/activation/swiglu.h"

namespace flashserve::kernels::internal {
namespace {

// ExpF of 4 values, without the special cases.
__m128 ExpTable4(__m128 x) {
  namespace t = exp_table;
  const __m256d xd = _mm256_cvtps_pd(x);
  const __m256d inv = _mm256_set1_pd(t::kInvLn2Scaled), shift = _mm256_set1_pd(t::kShift);
  const __m256d z = _mm256_fmadd_pd(inv, xd, shift);
  const __m256i k = _mm256_castpd_si256(z);
  const __m256d kd = _mm256_sub_pd(z, shift);
  const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
  const __m256i entry = _mm256_i64gather_epi64(reinterpret_cast<const long long*>(t::kTable),
                                               _mm256_and_si256(k, _mm256_set1_epi64x(31)), 8);
  const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(entry, _mm256_slli_epi64(k, 52 - t::kBits)));
  const __m256d p = _mm256_fmadd_pd(r, _mm256_set1_pd(t::kC0), _mm256_set1_pd(t::kC1));
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(t::kC2), _mm256_set1_pd(1.0));
  y = _mm256_fmadd_pd(p, r2, y);
  return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}

__m256 Where(__m256 mask, __m256 value, __m256 otherwise) { return _mm256_blendv_ps(otherwise, value, mask); }

// ExpF of 8 values.
__m256 ExpF8(__m256 x) {
  namespace t = exp_table;
  __m256 e = _mm256_set_m128(ExpTable4(_mm256_extractf128_ps(x, 1)), ExpTable4(_mm256_castps256_ps128(x)));
  e = Where(_mm256_cmp_ps(x, _mm256_set1_ps(t::kMinNormal), _CMP_LT_OQ), _mm256_set1_ps(0x1p-149f), e);
  e = Where(_mm256_cmp_ps(x, _mm256_set1_ps(t::kMin), _CMP_LT_OQ), _mm256_setzero_ps(), e);
  e = Where(_mm256_cmp_ps(x, _mm256_set1_ps(t::kMax), _CMP_GT_OQ), _mm256_set1_ps(INFINITY), e);
  return Where(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_add_ps(x, x), e);
}

}  // namespace

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
    const __m256 e = ExpF8(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(w, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u)));
  }
  for (; i < n; ++i) out[i] = exp_table::SwiGluScalar(gate[i], up[i], limit, weight);
}

}  // namespace flashserve::kernels::internal
