#include "model/number_formats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace flashserve::model {
namespace {

TEST(NumberFormatsTest, E4m3RoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    float v = E4m3ToFloat(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    uint8_t back = FloatToE4m3(v);
    if (c == 0x80) {
      EXPECT_EQ(back, 0x80);  // negative zero keeps its sign
    } else {
      EXPECT_EQ(back, c) << "value " << v;
    }
  }
  EXPECT_EQ(E4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(E4m3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(E4m3ToFloat(0x08), std::ldexp(1.0f, -6));  // smallest normal
}

TEST(NumberFormatsTest, E4m3RoundsToNearestEvenAndSaturates) {
  // Between 1.0 (0x38) and 1.125 (0x39): the midpoint goes to the even mantissa (1.0).
  EXPECT_EQ(FloatToE4m3(1.0625f), 0x38);
  // Between 1.125 and 1.25: midpoint 1.1875 goes to 1.25 (even mantissa 2).
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(1.1875f)), 1.25f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(1.19f)), 1.25f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(1000.0f)), 448.0f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(-1000.0f)), -448.0f);
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(std::ldexp(1.0f, -11))), 0.0f);  // below half the smallest subnormal
  EXPECT_EQ(E4m3ToFloat(FloatToE4m3(std::ldexp(3.0f, -10))), std::ldexp(2.0f, -9));  // tie -> even
}

TEST(NumberFormatsTest, E2m1GridTiesAndSign) {
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(std::fabs(E2m1ToFloat(static_cast<uint8_t>(c))), grid[c & 7]);
  EXPECT_LT(E2m1ToFloat(9), 0.0f);
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(0.25f)), 0.0f);   // tie -> code 0
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(0.75f)), 1.0f);   // tie -> code 2
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(1.25f)), 1.0f);   // tie -> code 2
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(2.5f)), 2.0f);    // tie -> code 4
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(5.0f)), 4.0f);    // tie -> code 6
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(5.1f)), 6.0f);
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(100.0f)), 6.0f);
  EXPECT_EQ(E2m1ToFloat(FloatToE2m1(-2.6f)), -3.0f);
}

TEST(NumberFormatsTest, Bf16AndF16AndE8m0) {
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), 0.333251953125f})
    EXPECT_EQ(F16ToFloat(FloatToF16(v)), v);
  EXPECT_EQ(E8m0ToFloat(127), 1.0f);
  EXPECT_EQ(E8m0ToFloat(120), std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isnan(E8m0ToFloat(0xFF)));
}

}  // namespace
}  // namespace flashserve::model

namespace flashserve::model {
namespace {

// Brute-force nearest-even references for the fast conversions.
uint8_t NearestE4m3(float f) {
  uint8_t best = 0;
  float a = std::fabs(f);
  for (int c = 0; c < 0x7F; ++c) {
    float d = std::fabs(a - E4m3ToFloat(static_cast<uint8_t>(c))), db = std::fabs(a - E4m3ToFloat(best));
    if (d < db || (d == db && (c % 2 == 0))) best = static_cast<uint8_t>(c);
  }
  return (std::signbit(f) ? 0x80 : 0) | best;
}

TEST(NumberFormatsTest, FastConversionsMatchBruteForceNearestEven) {
  std::vector<float> probes;
  for (int c = 0; c < 0x7E; ++c) {
    float v = E4m3ToFloat(static_cast<uint8_t>(c)), n = E4m3ToFloat(static_cast<uint8_t>(c + 1));
    probes.insert(probes.end(), {v, (v + n) / 2, std::nextafter((v + n) / 2, 0.0f), std::nextafter((v + n) / 2, 1e9f)});
  }
  for (float p : probes) {
    if (p >= 448.0f) continue;
    EXPECT_EQ(FloatToE4m3(p), NearestE4m3(p)) << p;
    EXPECT_EQ(FloatToE4m3(-p), NearestE4m3(-p)) << -p;
  }
  for (float p = 0; p < 8; p += 0.03125f) {
    uint8_t best = 0;
    for (uint8_t c = 1; c < 8; ++c) {
      float d = std::fabs(p - E2m1ToFloat(c)), db = std::fabs(p - E2m1ToFloat(best));
      if (d < db || (d == db && c % 2 == 0)) best = c;
    }
    EXPECT_EQ(FloatToE2m1(p), best) << p;
    EXPECT_EQ(FloatToE2m1(-p), best | 8) << -p;
  }
}

}  // namespace
}  // namespace flashserve::model
