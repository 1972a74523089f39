#include "kernels/activation/softmax_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/activation/swiglu.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {
namespace {

// The pool as written in v4-architecture.md: branch on whether the new logit is a new maximum.
void FoldNaive(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum) {
  for (int64_t k = 0; k < n; ++k) {
    if (z[k] > max[k]) {
      const float rescale = ExpF(max[k] - z[k]);
      sum[k] = sum[k] * rescale + 1.0f;
      wsum[k] = wsum[k] * rescale + a[k];
      max[k] = z[k];
    } else {
      const float e = ExpF(z[k] - max[k]);
      sum[k] += e;
      wsum[k] += e * a[k];
    }
  }
}

using FoldFn = void (*)(const float*, const float*, int64_t, float*, float*, float*);

// Folds `slots` rows of n channels from an empty pool with fn, returning max, sum, wsum.
std::vector<float> FoldAll(FoldFn fn, const std::vector<float>& a, const std::vector<float>& z, int64_t n,
                           int slots) {
  std::vector<float> state(3 * n, 0.0f);
  std::fill(state.begin(), state.begin() + n, -std::numeric_limits<float>::infinity());
  for (int s = 0; s < slots; ++s) fn(a.data() + s * n, z.data() + s * n, n, state.data(), state.data() + n, state.data() + 2 * n);
  return state;
}

TEST(SoftmaxPoolTest, EveryPathGivesTheBranchingLoopsBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<std::pair<const char*, FoldFn>> paths = {{"dispatch", &SoftmaxPoolFold}};
  if (IsaSupported(Isa::kAvx512)) paths.push_back({"avx512", &internal::SoftmaxPoolFoldAvx512});
  if (IsaSupported(Isa::kAvx2)) paths.push_back({"avx2", &internal::SoftmaxPoolFoldAvx2});
  for (int64_t n : {1, 7, 16, 37, 512}) {
    const int slots = 128;
    std::vector<float> a(slots * n), z(slots * n);
    for (float& v : a) v = normal(rng);
    for (size_t i = 0; i < z.size(); ++i) {
      z[i] = normal(rng);
      if (i % 13 == 0) z[i] = z[i > static_cast<size_t>(n) ? i - n : i];  // ties with an earlier slot
      if (i % 29 == 0) z[i] *= 30.0f;                                     // e^x underflows
    }
    const std::vector<float> want = FoldAll(&FoldNaive, a, z, n, slots);
    for (const auto& [name, fn] : paths) {
      const std::vector<float> got = FoldAll(fn, a, z, n, slots);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << name << " n=" << n;
    }
  }
}

TEST(SoftmaxPoolTest, PoolsTheSoftmaxWeightedMean) {
  // Three slots of one channel: wsum / sum = sum_s softmax(z)_s a_s.
  const float a[3] = {1.0f, 2.0f, 4.0f}, z[3] = {0.5f, 2.0f, -1.0f};
  float max = -std::numeric_limits<float>::infinity(), sum = 0.0f, wsum = 0.0f;
  for (int s = 0; s < 3; ++s) SoftmaxPoolFold(&a[s], &z[s], 1, &max, &sum, &wsum);
  double den = 0.0, num = 0.0;
  for (int s = 0; s < 3; ++s) {
    den += std::exp(static_cast<double>(z[s]));
    num += std::exp(static_cast<double>(z[s])) * a[s];
  }
  EXPECT_EQ(max, 2.0f);
  EXPECT_NEAR(wsum / sum, num / den, 1e-6);
}

}  // namespace
}  // namespace flashserve::kernels
