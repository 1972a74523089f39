// Scalar conversions between float and the checkpoint / QAT number formats: BF16, F16,
// FP8 e4m3fn, ue8m0 scales and FP4 e2m1 (v4-architecture.md section 3.3). Pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace flashserve::model {

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float Bf16ToFloat(uint16_t v) { return BitsToFloat(static_cast<uint32_t>(v) << 16); }
// Round to nearest even; NaN stays NaN.
uint16_t FloatToBf16(float f);

float F16ToFloat(uint16_t v);
uint16_t FloatToF16(float f);

// FP8 e4m3fn: bias 7, max 448, no infinities, 0x7F/0xFF are NaN.
float E4m3ToFloat(uint8_t v);
// Round to nearest even, saturating to +-448 (the QAT clamps before converting).
uint8_t FloatToE4m3(float f);

// ue8m0: 2^(v - 127); 0xFF is NaN.
float E8m0ToFloat(uint8_t v);

// FP4 e2m1 code (low 4 bits): magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign.
float E2m1ToFloat(uint8_t code);
// Round to the nearest e2m1 value, ties to the even code, saturating to +-6.
uint8_t FloatToE2m1(float f);

// Lookup tables (256 / 16 entries) for hot loops.
const float* E4m3Table();
const float* E2m1Table();

}  // namespace flashserve::model
