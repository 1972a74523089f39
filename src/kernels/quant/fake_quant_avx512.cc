// AVX-512 FP8 and FP4 QAT rounding (kernels/quant/fake_quant.h), bit-identical to the scalar
// paths: one block loop (the same amax and power-of-two scale) with the same round-to-nearest-
// even of q = x / scale (FP8: f32 bit trick for normal e4m3 values, a multiple of 2^-9 below
// 2^-6; FP4: the scalar encoder's midpoint comparisons). Compiled with the AVX-512 flags; called
// by fake_quant.cc after its CPU check; pure functions on caller-owned buffers, any thread.
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

// mag, or `value` where a compares to `edge` by kPredicate (a template argument: clang takes
// the comparison only as a constant).
template <int kPredicate>
__m512 Step(__m512 a, __m512 mag, float edge, float value) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(edge), kPredicate), mag, _mm512_set1_ps(value));
}

// q (|q| <= 6 or NaN) -> e2m1 value with q's sign: the thresholds of model::FloatToE2m1, whose
// midpoints go to the even code (<= at 0.25, 1.25, 2.5, 5; < at 0.75, 1.75, 3.5); NaN -> 6.
__m512 RoundE2m1(__m512 q) {
  const __m512 a = _mm512_abs_ps(q);
  __m512 mag = _mm512_setzero_ps();
  mag = Step<_CMP_GT_OQ>(a, mag, 0.25f, 0.5f);
  mag = Step<_CMP_GE_OQ>(a, mag, 0.75f, 1.0f);
  mag = Step<_CMP_GT_OQ>(a, mag, 1.25f, 1.5f);
  mag = Step<_CMP_GE_OQ>(a, mag, 1.75f, 2.0f);
  mag = Step<_CMP_GT_OQ>(a, mag, 2.5f, 3.0f);
  mag = Step<_CMP_GE_OQ>(a, mag, 3.5f, 4.0f);
  mag = Step<_CMP_GT_OQ>(a, mag, 5.0f, 6.0f);
  mag = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), mag, _mm512_set1_ps(6.0f));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(q), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sign));
}

__mmask16 Lanes(int64_t n) { return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1); }

// Per block of `block` values, as fake_quant.cc's FakeQuantBlocks: scale = the power of two at
// or above max(amax, amax_floor) / qmax, x = round(clamp(x / scale, +-qmax)) * scale. NaN is
// left out of amax (std::max(amax, NaN) keeps amax) and stays NaN through the clamp.
template <class Round>
void QuantBlocks(float* x, int64_t n, int block, float qmax, float amax_floor, Round round) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    __m512 amax = _mm512_setzero_ps();
    for (int64_t i = b0; i < b1; i += 16)  // NaN first: max_ps returns its second operand then
      amax = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(Lanes(b1 - i), x + i)), amax);
    const float scale = Pow2CeilScale(std::max(_mm512_reduce_max_ps(amax), amax_floor) / qmax);
    // x * (1 / scale) rounds like x / scale: both are x times an exact power of two.
    const __m512 inv = _mm512_set1_ps(1.0f / scale), out_scale = _mm512_set1_ps(scale);
    const __m512 lo = _mm512_set1_ps(-qmax), hi = _mm512_set1_ps(qmax);
    for (int64_t i = b0; i < b1; i += 16) {
      const __mmask16 m = Lanes(b1 - i);
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv);
      const __m512 clamped = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
      const __m512 q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), clamped, v);  // NaN stays
      _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(round(q), out_scale));
    }
  }
}

}  // namespace

void FakeQuantFp8Avx512(float* x, int64_t n, int block) { QuantBlocks(x, n, block, 448.0f, 1e-4f, RoundE4m3); }

void FakeQuantFp4Avx512(float* x, int64_t n, int block) {
  QuantBlocks(x, n, block, 6.0f, 6.0f * 0x1p-126f, RoundE2m1);
}

}  // namespace flashserve::kernels::internal
