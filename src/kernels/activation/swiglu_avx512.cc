// The AVX-512 SwiGlu loop (activation/swiglu.h): ExpF in double lanes, the same operations as
// the scalar code, 16 values per step (a masked last step). Compiled with AVX-512 flags.
#include <immintrin.h>

#include <cmath>

#include "kernels/activation/exp_table.h"
#include "kernels/activation/swiglu.h"

namespace flashserve::kernels::internal {
namespace {

// ExpF of 8 values, without the special cases (ExpF16 applies them).
__m256 ExpTable8(__m256 x) {
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
__m512 ExpF16(__m512 x) {
  namespace t = exp_table;
  __m512 e = _mm512_insertf32x8(_mm512_castps256_ps512(ExpTable8(_mm512_castps512_ps256(x))),
                                ExpTable8(_mm512_extractf32x8_ps(x, 1)), 1);
  e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(t::kMinNormal), _CMP_LT_OQ), _mm512_set1_ps(0x1p-149f));
  e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(t::kMin), _CMP_LT_OQ), _mm512_setzero_ps());
  e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(t::kMax), _CMP_GT_OQ), _mm512_set1_ps(INFINITY));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_add_ps(e, nan, x, x);
}

}  // namespace

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
    const __m512 e = ExpF16(_mm512_xor_ps(g, sign));
    const __m512 act = _mm512_mul_ps(w, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u));
    _mm512_mask_storeu_ps(out + i, m, act);
  }
}

}  // namespace flashserve::kernels::internal
