#include "kernels/simd/vec_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace flashserve::kernels::simd {
namespace {

std::vector<Isa> VectorIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) out.push_back(isa);
  return out;
}

std::vector<float> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// The documented order: one accumulator takes the vectors (the last zero-padded) in ascending
// order with FMA, then the halving tree.
float DocumentedDot(const float* a, const float* b, int64_t n, int lanes) {
  std::vector<float> acc(lanes, 0.0f);
  for (int64_t i = 0; i < (n + lanes - 1) / lanes * lanes; ++i)
    acc[i % lanes] = std::fma(i < n ? a[i] : 0.0f, i < n ? b[i] : 0.0f, acc[i % lanes]);
  for (int width = lanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// sum_squares: vector v into accumulator v % 4, (a0 + a1) + (a2 + a3), then the tree.
float DocumentedSumSquares(const float* x, int64_t n, int lanes) {
  std::vector<float> acc(4 * lanes, 0.0f);
  for (int64_t i = 0; i < (n + lanes - 1) / lanes * lanes; ++i) {
    const float v = i < n ? x[i] : 0.0f;
    float& a = acc[(i / lanes) % 4 * lanes + i % lanes];
    a = std::fma(v, v, a);
  }
  std::vector<float> t(lanes);
  for (int l = 0; l < lanes; ++l) t[l] = (acc[l] + acc[lanes + l]) + (acc[2 * lanes + l] + acc[3 * lanes + l]);
  for (int width = lanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) t[l] += t[l + width];
  return t[0];
}

TEST(VecOpsTest, DotsFollowTheDocumentedOrderWhateverTheBlocking) {
  std::mt19937 rng(1);
  for (Isa isa : VectorIsas()) {
    const VecOps& ops = GetVecOps(isa);
    for (int64_t n : {1, 7, 8, 15, 16, 17, 64, 100, 512}) {
      const int num_a = 7, num_b = 5;
      std::vector<std::vector<float>> a, b;
      std::vector<const float*> pa, pb;
      for (int i = 0; i < num_a; ++i) a.push_back(Random(n, rng));
      for (int j = 0; j < num_b; ++j) b.push_back(Random(n, rng));
      for (auto& v : a) pa.push_back(v.data());
      for (auto& v : b) pb.push_back(v.data());
      std::vector<float> out(num_a * num_b);
      ops.dots(pa.data(), num_a, pb.data(), num_b, n, out.data());
      for (int i = 0; i < num_a; ++i)
        for (int j = 0; j < num_b; ++j) {
          const float want = DocumentedDot(pa[i], pb[j], n, ops.lanes);
          EXPECT_TRUE(SameBits(want, out[i * num_b + j])) << IsaName(isa) << " n=" << n << " " << i << "," << j;
          EXPECT_TRUE(SameBits(want, ops.dot(pa[i], pb[j], n))) << IsaName(isa) << " n=" << n;
        }
      EXPECT_TRUE(SameBits(DocumentedSumSquares(pa[0], n, ops.lanes), ops.sum_squares(pa[0], n))) << n;
    }
  }
}

TEST(VecOpsTest, WeightedSumIsOneFmaPerRowInOrder) {
  std::mt19937 rng(2);
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    const VecOps& ops = GetVecOps(isa);
    for (int64_t n : {1, 5, 16, 23, 64, 100, 512}) {
      const int num_rows = 9, num_out = 6;
      std::vector<std::vector<float>> rows, weights, out(num_out, std::vector<float>(n + 1, 42.0f));
      std::vector<const float*> pr, pw;
      std::vector<float*> po;
      for (int j = 0; j < num_rows; ++j) rows.push_back(Random(n, rng));
      for (int o = 0; o < num_out; ++o) weights.push_back(Random(num_rows, rng));
      for (auto& v : rows) pr.push_back(v.data());
      for (auto& v : weights) pw.push_back(v.data());
      for (auto& v : out) po.push_back(v.data());
      ops.weighted_sum(pr.data(), num_rows, pw.data(), num_out, n, po.data());
      for (int o = 0; o < num_out; ++o) {
        for (int64_t c = 0; c < n; ++c) {
          float want = 0.0f;
          for (int j = 0; j < num_rows; ++j)
            want = isa == Isa::kGeneric ? want + weights[o][j] * rows[j][c] : std::fma(weights[o][j], rows[j][c], want);
          ASSERT_TRUE(SameBits(want, out[o][c])) << IsaName(isa) << " n=" << n << " out " << o << " c " << c;
        }
        EXPECT_EQ(out[o][n], 42.0f);  // guard untouched
      }
    }
  }
}

TEST(VecOpsTest, ScaleIsExactAndStaysInBounds) {
  std::mt19937 rng(6);
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    const VecOps& ops = GetVecOps(isa);
    for (int64_t n : {1, 5, 16, 23, 100}) {
      std::vector<float> x = Random(n, rng), w = Random(n, rng), out(n + 1, 42.0f);
      ops.scale(x.data(), w.data(), 0.7f, n, out.data());
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], w[i] * (x[i] * 0.7f)) << IsaName(isa) << " i=" << i;
      EXPECT_EQ(out[n], 42.0f);
      std::vector<float> scaled(x);
      ops.scale(scaled.data(), nullptr, 0.7f, n, scaled.data());  // in place, unweighted
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(scaled[i], x[i] * 0.7f) << IsaName(isa) << " i=" << i;
    }
  }
}

TEST(VecOpsTest, GenericDotMatchesFp64) {
  std::mt19937 rng(3);
  const VecOps& ops = GetVecOps(Isa::kGeneric);
  std::vector<float> a = Random(333, rng), b = Random(333, rng);
  double want = 0.0;
  for (int i = 0; i < 333; ++i) want += static_cast<double>(a[i]) * b[i];
  EXPECT_NEAR(ops.dot(a.data(), b.data(), 333), want, 1e-4);
  EXPECT_EQ(ops.lanes, 1);
}

TEST(VecOpsTest, ProbeLoopsRun) {
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    const VecOps& ops = GetVecOps(isa);
    std::vector<float> ones(256, 1.0f);
    EXPECT_EQ(ops.sum(ones.data(), 256), 256.0f) << IsaName(isa);
    EXPECT_TRUE(std::isfinite(ops.fma_loop(1000))) << IsaName(isa);
  }
}

}  // namespace
}  // namespace flashserve::kernels::simd
