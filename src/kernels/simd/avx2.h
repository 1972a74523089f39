// AVX2 + FMA + F16C vector traits for the CPU kernel templates (gemm/matmul_simd.h,
// simd/vec_ops_simd.h): 8-float vectors, loads, FMA, the fixed horizontal sum and the weight
// decoders. Include only from translation units built with AVX2 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/simd/constants.h"

namespace flashserve::kernels::simd {

struct Avx2 {
  using F = __m256;
  static constexpr int kLanes = 8;
  static F Zero() { return _mm256_setzero_ps(); }
  static F Load(const float* p) { return _mm256_loadu_ps(p); }
  // The first n < kLanes floats, zero-filled; masked lanes are never touched.
  static __m256i Mask(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
  static F LoadPartial(const float* p, int n) { return _mm256_maskload_ps(p, Mask(n)); }
  static void StorePartial(float* p, F v, int n) { _mm256_maskstore_ps(p, Mask(n), v); }
  static void Store(float* p, F v) { _mm256_storeu_ps(p, v); }
  // Into L2 (see Tile in gemm/matmul_simd.h).
  static void Prefetch(uintptr_t address) { _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T1); }
  static F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  // An empty asm that claims to change v: the compiler must hold v in a register instead of
  // folding its load into every instruction that reads it.
  static void KeepInRegister(F& v) { __asm__("" : "+x"(v)); }
  static F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F Set1(float v) { return _mm256_set1_ps(v); }
  static F Add(F a, F b) { return _mm256_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F Max(F a, F b) { return _mm256_max_ps(a, b); }
  static float MaxLanes(F v) {  // exact in any order
    const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
  }
  static float First(F v) { return _mm256_cvtss_f32(v); }
  // v's first n lanes, the others set to fill.
  static F FirstLanes(F v, int n, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(Mask(n)));
  }

  // Fixed tree: halves 4 + 4, then 2 + 2, 1 + 1.
  static float Sum(F v) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
  // Running magnitudes of x (Avx512::Magnitudes).
  static void Magnitudes(F x, F& lo, F& hi) {
    const F m = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    hi = _mm256_max_ps(m, hi);
    lo = _mm256_blendv_ps(lo, _mm256_min_ps(m, lo), _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ));
  }
  static float MinLanes(F v) {  // exact in any order
    const __m128 m4 = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 m2 = _mm_min_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_min_ss(m2, _mm_movehdup_ps(m2)));
  }
  // Lane k of the result is Sum(v[k]) bit for bit, for 8 vectors at once (Avx512::Sums).
  static F Sums(const F* v) {
    constexpr int kOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    F w[4];  // halves 4 + 4
    for (int p = 0; p < 4; ++p) {
      const F a = v[kOrder[2 * p]], b = v[kOrder[2 * p + 1]];
      w[p] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    F z[2];  // 2 + 2
    for (int p = 0; p < 2; ++p) {
      const __m256d r = _mm256_castps_pd(w[2 * p]), t = _mm256_castps_pd(w[2 * p + 1]);
      z[p] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(r, t)),
                           _mm256_castpd_ps(_mm256_unpackhi_pd(r, t)));
    }
    return _mm256_add_ps(_mm256_shuffle_ps(z[0], z[1], 0x88), _mm256_shuffle_ps(z[0], z[1], 0xDD));  // 1 + 1
  }

  // e^x for x <= 0, the AVX-512 method (simd/avx512.h); 2^n is built in the exponent field
  // (n >= -126 after the clamp).
  static F Exp(F x) {
    x = _mm256_max_ps(_mm256_set1_ps(kExpMin), x);
    const F t = _mm256_mul_ps(x, _mm256_set1_ps(kLog2e));
    const F n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
    F p = _mm256_set1_ps(kExpTaylor[0]);
    for (int i = 1; i < 8; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpTaylor[i]));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  }

  static F DecodeBf16(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static F DecodeF16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

  // Same bit trick as the AVX-512 decoder: the e4m3 value times 2^-8, exactly.
  static F DecodeFp8(const uint8_t* p) {
    const __m128i sx = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i h = _mm_and_si128(_mm_slli_epi16(sx, 7), _mm_set1_epi16(static_cast<short>(0xBF80)));
    return _mm256_cvtph_ps(h);
  }

  // The AVX-512 DecodeFp8Low: the e4m3 value times 2^-120, exactly.
  static F DecodeFp8Low(const uint8_t* p) {
    const __m256i d = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(d, 20), _mm256_set1_epi32(kFp8LowMask)));
  }

  // 8 bytes = 16 columns -> w[0] = the 8 even columns, w[1] = the 8 odd ones. The lookup
  // takes the low 3 bits (magnitude); bit 3 (sign), moved to bit 31, picks the negative half
  // of lut (the 16 e2m1 values times the block's scale).
  static void DecodeFp4(const uint8_t* p, const float* lut, F* w) {
    const __m256 pos = _mm256_loadu_ps(lut);
    const __m256 neg = _mm256_loadu_ps(lut + 8);
    const __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i hi = _mm256_srli_epi32(lo, 4);
    w[0] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(pos, lo), _mm256_permutevar8x32_ps(neg, lo),
                            _mm256_castsi256_ps(_mm256_slli_epi32(lo, 28)));
    w[1] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(pos, hi), _mm256_permutevar8x32_ps(neg, hi),
                            _mm256_castsi256_ps(_mm256_slli_epi32(hi, 28)));
  }
};

}  // namespace flashserve::kernels::simd
