#include "kernels/quant/fake_quant.h"

#include <gtest/gtest.h>

#include <bit>
#include <limits>

#include <cmath>
#include <random>
#include <vector>

#include "model/number_formats.h"

namespace flashserve::kernels {
namespace {

TEST(FakeQuantTest, Fp8UsesPowerOfTwoScalePerBlock) {
  // Block amax 448 -> scale 1: values already on the e4m3 grid survive unchanged.
  std::vector<float> x = {448.0f, 1.0f, -0.5f, 3.5f};
  FakeQuantFp8(x.data(), 4, 4);
  EXPECT_EQ(x, (std::vector<float>{448.0f, 1.0f, -0.5f, 3.5f}));
  // amax 900 -> scale 2^ceil(log2(900/448)) = 4; 1.0/4 = 0.25 is exact, 901 clamps to 448*4.
  std::vector<float> y = {900.0f, 1.0f, 1.1f, 0.0f};
  FakeQuantFp8(y.data(), 4, 4);
  EXPECT_EQ(y[0], 896.0f);  // 900/4 = 225 -> nearest e4m3 224
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 4.0f * model::E4m3ToFloat(model::FloatToE4m3(1.1f / 4.0f)));
  EXPECT_EQ(y[3], 0.0f);
}

TEST(FakeQuantTest, Fp8BlocksAreIndependentAndIdempotent) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(200);
  for (auto& v : x) v = d(rng);
  x[10] = 1000.0f;  // a large value affects only its own block of 64
  std::vector<float> a = x;
  FakeQuantFp8(a.data(), 200, 64);
  std::vector<float> tail(x.begin() + 64, x.end());
  FakeQuantFp8(tail.data(), 136, 64);
  for (int i = 64; i < 200; ++i) EXPECT_EQ(a[i], tail[i - 64]);
  std::vector<float> again = a;
  FakeQuantFp8(again.data(), 200, 64);
  EXPECT_EQ(again, a);
  for (int i = 0; i < 200; ++i) EXPECT_NEAR(a[i], x[i], std::fabs(x[i]) * 0.07 + 1e-3);
}

TEST(FakeQuantTest, FastFp8PathMatchesTheScalarConversionBitForBit) {
  std::mt19937 rng(17);
  std::vector<float> x;
  for (float scale : {1e-6f, 1e-3f, 0.1f, 1.0f, 30.0f, 1e4f}) {
    std::normal_distribution<float> d(0.0f, scale);
    for (int i = 0; i < 20000; ++i) x.push_back(d(rng));
  }
  for (int c = 0; c < 0x7F; ++c) {  // every e4m3 value and the midpoints around it
    float v = model::E4m3ToFloat(static_cast<uint8_t>(c));
    x.insert(x.end(), {v, -v, v * 1.0001f, v * 0.9999f, v + std::ldexp(1.0f, -12)});
  }
  // A NaN stays NaN and leaves the rest of its block alone (the scale comes from the others).
  x.insert(x.end(), {0.5f, std::numeric_limits<float>::quiet_NaN(), 3.0f, -7.0f});
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    for (int block : {64, 128, 32, 7}) {
      std::vector<float> fast = x, slow = x;
      FakeQuantFp8WithIsa(isa, fast.data(), static_cast<int64_t>(fast.size()), block);
      FakeQuantFp8Reference(slow.data(), static_cast<int64_t>(slow.size()), block);
      for (size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(x[i])) {
          ASSERT_TRUE(std::isnan(fast[i]) && std::isnan(slow[i])) << IsaName(isa);
          continue;
        }
        ASSERT_EQ(fast[i], slow[i]) << "x=" << x[i] << " block " << block << " " << IsaName(isa);
      }
    }
  }
}

TEST(FakeQuantTest, Fp4GridAndScale) {
  std::vector<float> x = {6.0f, 2.6f, -0.3f, 0.2f};
  FakeQuantFp4(x.data(), 4, 4);  // amax 6 -> scale 1
  EXPECT_EQ(x, (std::vector<float>{6.0f, 3.0f, -0.5f, 0.0f}));
  std::vector<float> y = {12.0f, 5.0f, 1.0f, 0.7f};
  FakeQuantFp4(y.data(), 4, 4);  // amax 12 -> scale 2
  EXPECT_EQ(y, (std::vector<float>{12.0f, 4.0f, 1.0f, 1.0f}));
}

TEST(FakeQuantTest, FastFp4PathMatchesTheScalarEncoderBitForBit) {
  std::mt19937 rng(19);
  std::vector<float> x;
  for (float scale : {1e-30f, 1e-6f, 1e-3f, 0.1f, 1.0f, 30.0f, 1e4f, 1e30f}) {
    std::normal_distribution<float> d(0.0f, scale);
    for (int i = 0; i < 20000; ++i) x.push_back(d(rng));
  }
  // Every e2m1 value, the midpoints between them and their neighbours, zeros of both signs,
  // subnormals, infinities and NaN, in blocks whose amax is 6 (scale 1).
  for (float v : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f}) {
    for (float u : {v, std::nextafter(v, 0.0f), std::nextafter(v, 7.0f)}) x.insert(x.end(), {u, -u, 6.0f, 0.0f});
  }
  x.insert(x.end(), {-0.0f, 1e-40f, -1e-42f, 6.0f, std::numeric_limits<float>::infinity(), 1.0f, 2.0f, 3.0f,
                     std::numeric_limits<float>::quiet_NaN(), 1.0f, -std::numeric_limits<float>::quiet_NaN(), 6.0f});
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    for (int block : {32, 16, 4, 7}) {
      std::vector<float> fast = x, slow = x;
      FakeQuantFp4WithIsa(isa, fast.data(), static_cast<int64_t>(fast.size()), block);
      FakeQuantFp4WithIsa(Isa::kGeneric, slow.data(), static_cast<int64_t>(slow.size()), block);
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(fast[i]), std::bit_cast<uint32_t>(slow[i]))
            << "x=" << x[i] << " at " << i << " block " << block << " " << IsaName(isa);
    }
  }
}

// Every value below is worked out by hand from the formats' definitions (v4-architecture.md
// section 3.3), not from the library's own conversions.
TEST(FakeQuantTest, Fp8RoundsAsWorkedOutByHand) {
  // amax 448 -> scale 1. 0.3 lies in [0.25, 0.5) where e4m3 steps by 1/32: 9.6 steps -> 10 ->
  // 0.3125. 17 lies in [16, 32) (step 2): a tie between 16 (even mantissa) and 18 -> 16.
  // 0.001 is below the smallest normal (2^-6): subnormal step 2^-9, 0.512 steps -> 1 step.
  std::vector<float> a = {448.0f, 0.3f, -17.0f, 0.001f, 19.0f, -0.0f};
  FakeQuantFp8(a.data(), 6, 6);
  EXPECT_EQ(a, (std::vector<float>{448.0f, 0.3125f, -16.0f, 0.001953125f, 20.0f, -0.0f}));
  // amax 1000 -> scale 2^ceil(log2(1000 / 448)) = 4: 1000 / 4 = 250 lies between 240 and 256
  // (step 16) -> 256 -> 1024; -3 / 4 = -0.75 is on the grid.
  std::vector<float> b = {1000.0f, -3.0f};
  FakeQuantFp8(b.data(), 2, 2);
  EXPECT_EQ(b, (std::vector<float>{1024.0f, -3.0f}));
  // A block of tiny values takes the amax floor 1e-4: scale 2^ceil(log2(1e-4 / 448)) = 2^-22;
  // 1e-6 / 2^-22 = 4.19 -> 4 (step 0.5 in [4, 8)) -> 2^-20.
  std::vector<float> c = {1e-6f, 0.0f};
  FakeQuantFp8(c.data(), 2, 2);
  EXPECT_EQ(c, (std::vector<float>{std::ldexp(1.0f, -20), 0.0f}));
}

TEST(FakeQuantTest, Fp4RoundsToNearestEvenAsWorkedOutByHand) {
  // e2m1 grid 0, 0.5, 1, 1.5, 2, 3, 4, 6. amax 6 -> scale 1. Ties go to the even mantissa:
  // 2.5 -> 2, 1.25 -> 1, 0.25 -> 0, 5 -> 4, 1.75 -> 2, 3.5 -> 4; 0.8 -> 1; beyond 6 clamps.
  std::vector<float> a = {6.0f, 2.5f, -1.25f, 0.25f, 5.0f, 1.75f, -3.5f, 0.8f};
  FakeQuantFp4(a.data(), 8, 8);
  EXPECT_EQ(a, (std::vector<float>{6.0f, 2.0f, -1.0f, 0.0f, 4.0f, 2.0f, -4.0f, 1.0f}));
  // amax 7 -> scale 2^ceil(log2(7 / 6)) = 2: 7 / 2 = 3.5 -> 4 -> 8; 1 / 2 = 0.5 -> 1.
  std::vector<float> b = {7.0f, 1.0f, -0.4f};
  FakeQuantFp4(b.data(), 3, 3);
  EXPECT_EQ(b, (std::vector<float>{8.0f, 1.0f, -0.0f}));
}

TEST(FakeQuantTest, Fp4WithE4m3ScaleAsWorkedOutByHand) {
  // amax 7 -> scale e4m3(7 / 6 = 1.1667) = 1.125 (step 1/8 in [1, 2)). 7 / 1.125 = 6.22 clamps
  // to 6 -> 6.75; 1 / 1.125 = 0.89 -> 1 -> 1.125; 2 / 1.125 = 1.78 -> 2 -> 2.25.
  std::vector<float> a = {7.0f, 1.0f, -2.0f, 0.0f};
  FakeQuantFp4E4m3(a.data(), 4, 4);
  EXPECT_EQ(a, (std::vector<float>{6.75f, 1.125f, -2.25f, 0.0f}));
  // amax 6 -> scale 1: the plain grid.
  std::vector<float> b = {6.0f, 2.5f, 0.3f};
  FakeQuantFp4E4m3(b.data(), 3, 3);
  EXPECT_EQ(b, (std::vector<float>{6.0f, 2.0f, 0.5f}));
}

TEST(FakeQuantTest, HadamardIsOrthonormalAndSelfInverse) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  HadamardTransform(x.data(), 4);
  EXPECT_FLOAT_EQ(x[0], 5.0f);   // (1+2+3+4)/2
  EXPECT_FLOAT_EQ(x[1], -1.0f);  // (1-2+3-4)/2
  EXPECT_FLOAT_EQ(x[2], -2.0f);  // (1+2-3-4)/2
  EXPECT_FLOAT_EQ(x[3], 0.0f);   // (1-2-3+4)/2
  std::mt19937 rng(9);
  std::normal_distribution<float> d;
  std::vector<float> v(128), w;
  for (auto& e : v) e = d(rng);
  w = v;
  HadamardTransform(w.data(), 128);
  HadamardTransform(w.data(), 128);
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(w[i], v[i], 1e-5);
}

}  // namespace
}  // namespace flashserve::kernels
