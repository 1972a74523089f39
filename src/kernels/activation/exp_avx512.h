// ExpF (activation/swiglu.h) on 16 floats at once with AVX-512: the scalar code's operations in
// double lanes. Included only by this room's files built with AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cmath>

#include "kernels/activation/exp_table.h"

namespace flashserve::kernels::internal::exp_vec {

// ExpF of 8 values, without the special cases (ExpF16 applies them).
inline __m256 ExpTable8(__m256 x) {
  namespace t = exp_table;
  const __m512d xd = _mm512_cvtps_pd(x);
  const __m512d inv = _mm512_set1_pd(t::kInvLn2Scaled), shift = _mm512_set1_pd(t::kShift);
  const __m512d z = _mm512_fmadd_pd(inv, xd, shift);
  const __m512i k = _mm512_castpd_si512(z);
  const __m512d kd = _mm512_sub_pd(z, shift);
  const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
  const __m512i* table = reinterpret_cast<const __m512i*>(t::kTable);
  const __m512i low = _mm512_permutex2var_epi64(_mm512_loadu_si512(table), k, _mm512_loadu_si512(table + 1));
  const __m512i high = _mm512_permutex2var_epi64(_mm512_loadu_si512(table + 2), k, _mm512_loadu_si512(table + 3));
  const __m512i entry = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(k, _mm512_set1_epi64(16)), low, high);
  const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64(k, 52 - t::kBits)));
  const __m512d p = _mm512_fmadd_pd(r, _mm512_set1_pd(t::kC0), _mm512_set1_pd(t::kC1));
  const __m512d r2 = _mm512_mul_pd(r, r);
  __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(t::kC2), _mm512_set1_pd(1.0));
  y = _mm512_fmadd_pd(p, r2, y);
  return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}

// ExpF of 16 values.
inline __m512 ExpF16(__m512 x) {
  namespace t = exp_table;
  __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(ExpTable8(_mm512_castps512_ps256(x))),
                                ExpTable8(_mm512_extractf32x8_ps(x, 1)), 1);
  e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(t::kMinNormal), _CMP_LT_OQ), _mm512_set1_ps(0x1p-149f));
  e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(t::kMin), _CMP_LT_OQ), _mm512_setzero_ps());
  e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(t::kMax), _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_add_ps(e, nan, x, x);
}

}  // namespace flashserve::kernels::internal::exp_vec
