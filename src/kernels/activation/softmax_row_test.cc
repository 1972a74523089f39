// ExpShiftedSum: the same bits on every instruction set (AVX-512, AVX2 and the scalar loop, at
// lengths around the vector widths), within float rounding of a double-precision reference,
// and the row's largest entry becomes exactly 1.
#include "kernels/activation/softmax_row.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/simd/isa.h"

namespace flashserve::kernels {
namespace {

std::vector<float> Row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 6.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

float Scalar(std::vector<float>& x, float scale) {
  float top = x[0];
  for (float v : x) top = std::max(top, v);
  float lanes[16] = {};
  internal::ExpShiftedScalar(x.data(), 0, static_cast<int64_t>(x.size()), top * scale, scale, lanes);
  return internal::CombineLanes(lanes);
}

TEST(ExpShiftedSum, EveryIsaGivesTheScalarBits) {
  for (int64_t n : {1, 7, 15, 16, 17, 31, 33, 100, 3456}) {
    const float scale = 0.125f;
    std::vector<float> want = Row(n, static_cast<uint32_t>(n));
    const float want_sum = Scalar(want, scale);
    std::vector<float> got = Row(n, static_cast<uint32_t>(n));
    const float sum = ExpShiftedSum(got.data(), n, scale);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "n " << n;
    EXPECT_EQ(std::bit_cast<uint32_t>(sum), std::bit_cast<uint32_t>(want_sum)) << "n " << n;
    std::vector<float> avx2 = Row(n, static_cast<uint32_t>(n)), avx512 = avx2;
    const float top = *std::max_element(avx2.begin(), avx2.end());
    if (IsaSupported(Isa::kAvx2)) {
      EXPECT_EQ(internal::RowMaxAvx2(avx2.data(), n), top) << n;
    }
    if (IsaSupported(Isa::kAvx512)) {
      EXPECT_EQ(internal::RowMaxAvx512(avx512.data(), n), top) << n;
    }
    if (IsaSupported(Isa::kAvx2)) {
      const float s = internal::ExpShiftedSumAvx2(avx2.data(), n, top * scale, scale);
      EXPECT_EQ(std::memcmp(avx2.data(), want.data(), want.size() * sizeof(float)), 0) << "avx2, n " << n;
      EXPECT_EQ(std::bit_cast<uint32_t>(s), std::bit_cast<uint32_t>(want_sum)) << "avx2, n " << n;
    }
    if (IsaSupported(Isa::kAvx512)) {
      const float s = internal::ExpShiftedSumAvx512(avx512.data(), n, top * scale, scale);
      EXPECT_EQ(std::memcmp(avx512.data(), want.data(), want.size() * sizeof(float)), 0) << "avx512, n " << n;
      EXPECT_EQ(std::bit_cast<uint32_t>(s), std::bit_cast<uint32_t>(want_sum)) << "avx512, n " << n;
    }
  }
}

TEST(ExpShiftedSum, MatchesADoubleReference) {
  const int64_t n = 1000;
  const float scale = 0.2f;
  const std::vector<float> in = Row(n, 5);
  std::vector<float> x = in;
  const float sum = ExpShiftedSum(x.data(), n, scale);
  const double top = *std::max_element(in.begin(), in.end()) * static_cast<double>(scale);
  double want_sum = 0;
  bool saw_one = false;
  for (int64_t j = 0; j < n; ++j) {
    const double want = std::exp(static_cast<double>(in[static_cast<size_t>(j)]) * scale - top);
    want_sum += want;
    EXPECT_NEAR(x[static_cast<size_t>(j)], want, 1e-6 * want + 1e-30) << j;
    saw_one |= x[static_cast<size_t>(j)] == 1.0f;
  }
  EXPECT_TRUE(saw_one);
  EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum);
}

}  // namespace
}  // namespace flashserve::kernels
