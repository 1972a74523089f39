// Constants shared by the vector traits (simd/avx2.h, simd/avx512.h): the exponential of the
// attention softmax and the FP8 decoder's mask. Plain values; no instruction-set code.
#pragma once

namespace flashserve::kernels::simd {

// Inputs below kExpMin are raised to it, so that 2^n stays a normal float (n >= -126).
inline constexpr float kExpMin = -87.3f;
inline constexpr float kLog2e = 1.44269504088896341f;
// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi = 355/512 (9 significant bits): n * kLn2Hi is exact for |n| < 2^15.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440054690583e-4f;
// 1/k! for k = 7 down to 0 (Horner order).
inline constexpr float kExpTaylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

// DecodeFp8Low keeps the sign (bit 31) and the e4m3 exponent and mantissa (bits 26..20).
inline constexpr int kFp8LowMask = static_cast<int>(0x87F00000u);

}  // namespace flashserve::kernels::simd
