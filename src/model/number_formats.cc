// Number-format conversions (model/number_formats.h).
#include "model/number_formats.h"

#include <array>
#include <cmath>
#include <limits>

namespace flashserve::model {

uint16_t FloatToBf16(float f) {
  uint32_t bits = FloatToBits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float F16ToFloat(uint16_t v) {
  uint32_t sign = static_cast<uint32_t>(v & 0x8000) << 16;
  int exp = (v >> 10) & 0x1F;
  uint32_t mant = v & 0x3FF;
  if (exp == 0) {
    float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -mag : mag;
  }
  if (exp == 31) return BitsToFloat(sign | 0x7F800000u | (mant << 13));
  return BitsToFloat(sign | (static_cast<uint32_t>(exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t FloatToF16(float f) {
  uint32_t bits = FloatToBits(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7E00;
  if (a >= 65520.0f) return sign | 0x7C00;  // rounds to infinity
  if (a < 6.103515625e-05f) {                // subnormal: units of 2^-24
    float units = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<uint16_t>(units);
  }
  uint32_t abits = FloatToBits(a);
  uint32_t rounding = 0xFFF + ((abits >> 13) & 1);
  abits += rounding;
  uint32_t exp = (abits >> 23) - 127 + 15;
  uint32_t mant = (abits >> 13) & 0x3FF;
  return sign | static_cast<uint16_t>((exp << 10) | mant);
}

float E4m3ToFloat(uint8_t v) {
  int exp = (v >> 3) & 0xF;
  int mant = v & 7;
  float mag;
  if (exp == 0xF && mant == 7) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -9);
  } else {
    mag = std::ldexp(1.0f + mant / 8.0f, exp - 7);
  }
  return (v & 0x80) ? -mag : mag;
}

uint8_t FloatToE4m3(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint32_t bits = FloatToBits(f);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9 (rounding up to 8 gives 2^-6)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Normal: keep 3 mantissa bits, round to nearest even on the 20 dropped bits.
  uint32_t abits = bits & 0x7FFFFFFFu;
  abits += 0x7FFFFu + ((abits >> 20) & 1u);
  const int exp = static_cast<int>(abits >> 23) - 127 + 7;
  const uint32_t code = (static_cast<uint32_t>(exp) << 3) | ((abits >> 20) & 7u);
  return sign | static_cast<uint8_t>(code > 0x7E ? 0x7E : code);
}

float E8m0ToFloat(uint8_t v) {
  if (v == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

namespace {
constexpr float kE2m1Mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}  // namespace

float E2m1ToFloat(uint8_t code) {
  float mag = kE2m1Mag[code & 7];
  return (code & 8) ? -mag : mag;
}

uint8_t FloatToE2m1(float f) {
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 7;
  // Midpoints between grid values; at a midpoint the even code wins.
  uint8_t code;
  if (a <= 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a <= 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a <= 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a <= 5.0f) code = 6;
  else code = 7;
  return sign | code;
}

const float* E4m3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = E4m3ToFloat(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

const float* E2m1Table() {
  static const std::array<float, 16> table = [] {
    std::array<float, 16> t{};
    for (int i = 0; i < 16; ++i) t[i] = E2m1ToFloat(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

}  // namespace flashserve::model
