// Seeded randomness: determinism, uniform draws, and the statistics of Poisson arrivals.
#include "loadgen/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace flashserve::loadgen {
namespace {

TEST(RngTest, SameSeedSameNumbersDifferentStreamsDiffer) {
  Rng a(7, 1, 2), b(7, 1, 2), c(7, 1, 3), d(7, 2, 2);
  for (int i = 0; i < 100; ++i) {
    double x = a.Uniform();
    EXPECT_EQ(x, b.Uniform());
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
  }
  EXPECT_NE(Rng(7, 1, 2).Uniform(), c.Uniform());
  EXPECT_NE(Rng(7, 1, 2).Uniform(), d.Uniform());
}

TEST(RngTest, UniformIntCoversTheInclusiveRange) {
  Rng rng(3);
  std::vector<int> hits(5, 0);
  for (int i = 0; i < 5000; ++i) {
    int64_t v = rng.UniformInt(10, 14);
    ASSERT_GE(v, 10);
    ASSERT_LE(v, 14);
    ++hits[v - 10];
  }
  for (int h : hits) EXPECT_NEAR(h, 1000, 150);
  EXPECT_EQ(rng.UniformInt(5, 5), 5);
}

TEST(PoissonArrivalsTest, IsDeterministicForASeed) {
  PoissonArrivals a(4.0, 11), b(4.0, 11), c(4.0, 12);
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    double t = a.Next();
    EXPECT_EQ(t, b.Next());
    differs |= t != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(PoissonArrivalsTest, GapsAreExponentialWithTheRequestedRate) {
  const double rate = 8.0;
  const int n = 40000;
  PoissonArrivals arrivals(rate, 2024);
  std::vector<double> gaps;
  double prev = 0.0;
  for (int i = 0; i < n; ++i) {
    double t = arrivals.Next();
    ASSERT_GE(t, prev);
    gaps.push_back(t - prev);
    prev = t;
  }
  double mean = 0, var = 0;
  for (double g : gaps) mean += g / n;
  for (double g : gaps) var += (g - mean) * (g - mean) / (n - 1);
  EXPECT_NEAR(mean, 1.0 / rate, 0.02 / rate);          // ~4 standard errors
  EXPECT_NEAR(var, 1.0 / (rate * rate), 0.05 / (rate * rate));
  // P(gap < mean) = 1 - 1/e for an exponential distribution.
  int below = 0;
  for (double g : gaps) below += g < 1.0 / rate;
  EXPECT_NEAR(static_cast<double>(below) / n, 1.0 - std::exp(-1.0), 0.01);
  // Counts per 1-second window are Poisson: variance / mean (dispersion) close to 1.
  std::vector<int> counts(static_cast<size_t>(prev) + 1, 0);
  double t = 0;
  for (double g : gaps) ++counts[static_cast<size_t>(t += g)];
  counts.pop_back();  // the last, partial window
  double cm = 0, cv = 0;
  for (int c : counts) cm += static_cast<double>(c) / counts.size();
  for (int c : counts) cv += (c - cm) * (c - cm) / (counts.size() - 1);
  EXPECT_NEAR(cm, rate, 0.2);
  EXPECT_NEAR(cv / cm, 1.0, 0.15);
}

TEST(PoissonArrivalsTest, InfiniteRateSendsEverythingAtOnce) {
  PoissonArrivals arrivals(INFINITY, 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(arrivals.Next(), 0.0);
}

}  // namespace
}  // namespace flashserve::loadgen
