#include "kernels/norm_rope/norm_rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace flashserve::kernels {
namespace {

TEST(NormRopeTest, RmsNormMatchesReference) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (int n : {1, 15, 16, 17, 300, 4096}) {
    std::vector<float> x(n), w(n), a(n), b(n);
    for (auto& v : x) v = d(rng);
    for (auto& v : w) v = d(rng);
    RmsNorm(x.data(), w.data(), n, 1e-6f, a.data());
    RmsNormReference(x.data(), w.data(), n, 1e-6f, b.data());
    for (int i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i])));
    RmsNorm(x.data(), nullptr, n, 1e-6f, a.data());
    double ss = 0;
    for (float v : a) ss += v * v;
    EXPECT_NEAR(ss / n, 1.0, 1e-4);
  }
}

TEST(NormRopeTest, EveryIsaMatchesReferenceAndInverseRms) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    for (int n : {1, 7, 16, 33, 512, 4096}) {
      std::vector<float> x(n), w(n), a(n), b(n);
      for (auto& v : x) v = d(rng);
      for (auto& v : w) v = d(rng);
      RmsNormWithIsa(isa, x.data(), w.data(), n, 1e-6f, a.data());
      RmsNormReference(x.data(), w.data(), n, 1e-6f, b.data());
      for (int i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i]))) << IsaName(isa);
      std::vector<float> in_place(x);
      RmsNormWithIsa(isa, in_place.data(), nullptr, n, 1e-6f, in_place.data());
      RmsNormWithIsa(isa, x.data(), nullptr, n, 1e-6f, a.data());
      EXPECT_EQ(in_place, a) << IsaName(isa);
    }
  }
  // InverseRms shares RmsNorm's summation (BestIsa), bit for bit.
  std::vector<float> x(300), out(300);
  for (auto& v : x) v = d(rng);
  RmsNorm(x.data(), nullptr, 300, 1e-6f, out.data());
  const float inv = InverseRms(x.data(), 300, 1e-6f);
  for (int i = 0; i < 300; ++i) EXPECT_EQ(out[i], x[i] * inv);
}

TEST(NormRopeTest, YarnFrequenciesFollowTheRamp) {
  // theta 160000, 64 dims, factor 16, L 65536: pairs 0..15 keep f_i, pairs >= 25 divide by 16.
  YarnScaling yarn{16.0, 65536, 32.0, 1.0};
  RopeTable plain(64, 160000.0, YarnScaling{});
  RopeTable scaled(64, 160000.0, yarn);
  for (int i = 0; i < 32; ++i) {
    double f = std::pow(160000.0, -2.0 * i / 64);
    EXPECT_DOUBLE_EQ(plain.frequencies()[i], f);
    if (i <= 15) {
      EXPECT_DOUBLE_EQ(scaled.frequencies()[i], f) << i;
    }
    if (i >= 25) {
      EXPECT_NEAR(scaled.frequencies()[i], f / 16, 1e-18) << i;
    }
    if (i > 15 && i < 25) {
      EXPECT_LT(scaled.frequencies()[i], f);
      EXPECT_GT(scaled.frequencies()[i], f / 16);
    }
  }
}

TEST(NormRopeTest, RopeRotatesPairsAndInverseUndoes) {
  RopeTable table(8, 10000.0, YarnScaling{});
  float c[4], s[4];
  table.Angles(3, c, s);
  std::vector<float> x = {1, 0, 0, 1, 2, 3, -1, 5};
  std::vector<float> y = x;
  ApplyRope(y.data(), 4, c, s, false);
  EXPECT_NEAR(y[0], std::cos(3.0), 1e-6);  // pair 0 has frequency 1
  EXPECT_NEAR(y[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(y[2], -std::sin(3.0 * std::pow(10000.0, -0.25)), 1e-6);
  ApplyRope(y.data(), 4, c, s, true);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
  table.Angles(0, c, s);
  y = x;
  ApplyRope(y.data(), 4, c, s, false);
  EXPECT_EQ(y, x);
}

}  // namespace
}  // namespace flashserve::kernels
