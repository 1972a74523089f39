// ExpF (activation/swiglu.h) on 8 floats at once with AVX2 + FMA: the scalar code's operations in
// double lanes, the table by gather. Included only by this room's files built with AVX2 flags.
#pragma once

#include <immintrin.h>

#include <cmath>

#include "kernels/activation/exp_table.h"

namespace flashserve::kernels::internal::exp_vec {

// ExpF of 4 values, without the special cases.
inline __m128 ExpTable4(__m128 x) {
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

inline __m256 Where(__m256 mask, __m256 value, __m256 otherwise) { return _mm256_blendv_ps(otherwise, value, mask); }

// ExpF of 8 values.
inline __m256 ExpF8(__m256 x) {
  namespace t = exp_table;
  __m256 e = _mm256_set_m128(ExpTable4(_mm256_extractf128_ps(x, 1)), ExpTable4(_mm256_castps256_ps128(x)));
  e = Where(_mm256_cmp_ps(x, _mm256_set1_ps(t::kMinNormal), _CMP_LT_OQ), _mm256_set1_ps(0x1p-149f), e);
  e = Where(_mm256_cmp_ps(x, _mm256_set1_ps(t::kMin), _CMP_LT_OQ), _mm256_setzero_ps(), e);
  e = Where(_mm256_cmp_ps(x, _mm256_set1_ps(t::kMax), _CMP_GT_OQ), _mm256_set1_ps(INFINITY), e);
  return Where(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), _mm256_add_ps(x, x), e);
}

}  // namespace flashserve::kernels::internal::exp_vec
