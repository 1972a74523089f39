// AVX-512 FP8 QAT rounding (kernels/quant/fake_quant.h), bit-identical to the scalar path: the
// same block amax and power-of-two scale, and the same round-to-nearest-even of q = x / scale
// (f32 bit trick for normal e4m3 values, a multiple of 2^-9 below 2^-6). Compiled with the
// AVX-512 flags; reached only after the CPU check in fake_quant.cc.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

namespace flashserve::kernels::internal {

namespace {

float Pow2CeilScale(float v) {
  int e;
  const float m = std::frexp(v, &e);
  return m == 0.5f ? std::ldexp(1.0f, e - 1) : std::ldexp(1.0f, e);
}

__m512 RoundE4m3(__m512 q) {
  const __m512i bits = _mm512_castps_si512(q);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 20), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_and_si512(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF), odd)),
                                           _mm512_set1_epi32(static_cast<int>(0xFFF00000u)));
  const __m512 sub = _mm512_mul_ps(
      _mm512_roundscale_ps(_mm512_mul_ps(q, _mm512_set1_ps(512.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      _mm512_set1_ps(1.0f / 512.0f));
  const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(q), _mm512_set1_ps(0.015625f), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(tiny, _mm512_castsi512_ps(rounded), sub);
}

__mmask16 Lanes(int64_t n) { return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1); }

}  // namespace

void FakeQuantFp8Avx512(float* x, int64_t n, int block) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    __m512 amax = _mm512_setzero_ps();
    for (int64_t i = b0; i < b1; i += 16)
      amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_maskz_loadu_ps(Lanes(b1 - i), x + i)));
    const float scale = Pow2CeilScale(std::max(_mm512_reduce_max_ps(amax), 1e-4f) / 448.0f);
    const __m512 inv = _mm512_set1_ps(1.0f / scale), out_scale = _mm512_set1_ps(scale);
    const __m512 lo = _mm512_set1_ps(-448.0f), hi = _mm512_set1_ps(448.0f);
    for (int64_t i = b0; i < b1; i += 16) {
      const __mmask16 m = Lanes(b1 - i);
      const __m512 q = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv), lo), hi);
      _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(RoundE4m3(q), out_scale));
    }
  }
}

}  // namespace flashserve::kernels::internal
