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
