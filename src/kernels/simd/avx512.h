// AVX-512 (F, BW, VL, DQ) + FMA + F16C vector traits for the CPU kernel templates
// (gemm/matmul_simd.h, simd/vec_ops_simd.h): 16-float vectors, loads, FMA, the fixed horizontal
// sum and the weight decoders. Include only from translation units built with AVX-512 flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/simd/constants.h"

namespace flashserve::kernels::simd {

struct Avx512 {
  using F = __m512;
  static constexpr int kLanes = 16;
  static F Zero() { return _mm512_setzero_ps(); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  // The first n < kLanes floats, zero-filled; masked lanes are never touched.
  static F LoadPartial(const float* p, int n) { return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p); }
  static void StorePartial(float* p, F v, int n) { _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v); }
  static void Store(float* p, F v) { _mm512_storeu_ps(p, v); }
  // Into L2 (see Tile in gemm/matmul_simd.h).
  static void Prefetch(uintptr_t address) { _mm_prefetch(reinterpret_cast<const char*>(address), _MM_HINT_T1); }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  // An empty asm that claims to change v: the compiler must hold v in a register instead of
  // folding its load into every instruction that reads it.
  static void KeepInRegister(F& v) { __asm__("" : "+v"(v)); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F Set1(float v) { return _mm512_set1_ps(v); }
  static F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F Max(F a, F b) { return _mm512_max_ps(a, b); }
  static float MaxLanes(F v) { return _mm512_reduce_max_ps(v); }  // exact in any order
  static float First(F v) { return _mm512_cvtss_f32(v); }
  // v's first n lanes, the others set to fill.
  static F FirstLanes(F v, int n, float fill) {
    return _mm512_mask_mov_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << n) - 1), v);
  }

  // Fixed tree: halves 8 + 8, then 4 + 4, 2 + 2, 1 + 1.
  static float Sum(F v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
  // Running magnitudes of x: hi = max(hi, |x|), lo = min(lo, |x|) over nonzero lanes; NaN
  // lanes change neither (max returns its second operand when one is NaN; NaN > 0 is false).
  static void Magnitudes(F x, F& lo, F& hi) {
    const F m = _mm512_abs_ps(x);
    hi = _mm512_max_ps(m, hi);
    lo = _mm512_mask_min_ps(lo, _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_GT_OQ), m, lo);
  }
  static float MinLanes(F v) { return _mm512_reduce_min_ps(v); }  // exact in any order
  // Lane k of the result is Sum(v[k]) bit for bit: Sum's additions of the same pairs, done for
  // 16 vectors at once (30 shuffles and 15 adds instead of 64 and 64). The visiting order of
  // v makes the sums come out in lane order.
  static F Sums(const F* v) {
    constexpr int kOrder[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
    F w[8];  // halves 8 + 8: w[p] holds two vectors' 8-lane partial sums
    for (int p = 0; p < 8; ++p) {
      const F a = v[kOrder[2 * p]], b = v[kOrder[2 * p + 1]];
      w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    F u[4];  // 4 + 4: u[p] holds four 4-lane partial sums
    for (int p = 0; p < 4; ++p)
      u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], 0x88),
                           _mm512_shuffle_f32x4(w[2 * p], w[2 * p + 1], 0xDD));
    F z[2];  // 2 + 2
    for (int p = 0; p < 2; ++p) {
      const __m512d r = _mm512_castps_pd(u[2 * p]), t = _mm512_castps_pd(u[2 * p + 1]);
      z[p] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(r, t)), _mm512_castpd_ps(_mm512_unpackhi_pd(r, t)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xDD));  // 1 + 1
  }

  // e^x for x <= 0 (softmax numerators) within about 2 ulp: x = n ln2 + r (Cody-Waite), e^r by
  // its Taylor polynomial to r^7 (|r| <= ln2 / 2), times 2^n. NaN stays NaN; x below -87.3 is
  // taken as -87.3 (e^x about 1e-38 instead of smaller).
  static F Exp(F x) {
    x = _mm512_max_ps(_mm512_set1_ps(kExpMin), x);
    const F t = _mm512_mul_ps(x, _mm512_set1_ps(kLog2e));
    const F n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    F p = _mm512_set1_ps(kExpTaylor[0]);
    for (int i = 1; i < 8; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpTaylor[i]));
    return _mm512_scalef_ps(p, n);
  }

  static F DecodeBf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static F DecodeF16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }

  // e4m3 byte -> f16 with the same sign, exponent and mantissa bits: sign-extend to 16 bits,
  // shift left 7, clear bit 14. The result is the e4m3 value times 2^-8, exactly (normals and
  // subnormals alike); the tile scale is applied by the caller.
  static F DecodeFp8(const uint8_t* p) {
    const __m256i sx = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(sx, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
    return _mm512_cvtph_ps(h);
  }

  // e4m3 byte -> f32 with the e4m3 exponent in the low exponent bits: sign-extend to 32 bits,
  // shift left 20, keep bits 31 and 26..20. The result is the e4m3 value times 2^-120 exactly
  // (an f32 subnormal for e4m3 subnormals: callers check that denormals are not flushed). One
  // shuffle and two simple operations instead of the f16 route's conversion (faster at n = 1).
  static F DecodeFp8Low(const uint8_t* p) {
    const __m512i d = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(d, 20), _mm512_set1_epi32(kFp8LowMask)));
  }

  // 16 bytes = 32 columns -> w[0] = the 16 even columns, w[1] = the 16 odd ones. vpermps reads
  // only the low 4 bits of each index, so the byte itself indexes its low nibble. lut: the 16
  // e2m1 values times the block's scale.
  static void DecodeFp4(const uint8_t* p, const float* lut, F* w) {
    const __m512 table = _mm512_loadu_ps(lut);
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    w[0] = _mm512_permutexvar_ps(idx, table);
    w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(idx, 4), table);
  }

  // The same from the lane-pair layout (model::Fp4Layout): the 16 bytes broadcast to every
  // 128-bit lane L, each dword shifted right by 4L, put lane l's odd column's code in bits 0-3
  // and its even column's in bits 16-19. One shuffle fewer than DecodeFp4.
  static __m512i Fp4LanePairCodes(const uint8_t* p) {
    const __m512i shifts = _mm512_set_epi32(12, 12, 12, 12, 8, 8, 8, 8, 4, 4, 4, 4, 0, 0, 0, 0);
    return _mm512_srlv_epi32(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), shifts);
  }
  static void DecodeFp4LanePairs(const uint8_t* p, const float* lut, F* w) {
    const __m512 table = _mm512_loadu_ps(lut);
    const __m512i codes = Fp4LanePairCodes(p);
    w[0] = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 16), table);
    w[1] = _mm512_permutexvar_ps(codes, table);
  }
};

}  // namespace flashserve::kernels::simd
