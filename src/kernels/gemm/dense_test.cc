// Dense products: every output equals the documented order in scalar code (one FMA chain over k,
// then added to C when accumulating) bit for bit, at edge sizes of rows, columns
// and k, from both packings, with accumulation; a row's bits do not depend on the row count or
// the thread count; DenseMatMul on F32 and BF16 weights; and near fp64 (sums of 300 products of N(0,1) values: 1e-4).
#include "kernels/gemm/dense.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

#include "kernels/gemm/dense_internal.h"
#include "kernels/gemm/matmul.h"
#include "kernels/simd/isa.h"
#include "kernels/test_matrices.h"

namespace flashserve::kernels {
namespace {

// C[i, j] in the documented order; b[k * n + j].
float ScalarOrder(const float* a, const float* b, int64_t k, int64_t n, int64_t j, float start, bool accumulate) {
  float s = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) s = std::fma(a[kk], b[kk * n + j], s);
  return accumulate ? start + s : s;
}

bool SameBits(float x, float y) { return std::memcmp(&x, &y, sizeof(float)) == 0; }

TEST(Dense, EveryOutputFollowsTheDocumentedOrder) {
  std::mt19937 rng(3);
  for (int64_t m : {1, 5, 13, 50, 200, 350}) {
    for (int64_t n : {1, 7, 16, 33, 64, 100, 161}) {
      for (int64_t k : {1, 64, 255, 256, 257, 600, 1100}) {
        const int64_t lda = k + 5;  // rows apart, as attention's score rows are
        const std::vector<float> a = RandomVector(m * lda, rng), b = RandomVector(k * n, rng);
        std::vector<float> bt(static_cast<size_t>(n * k));  // B as n rows of k
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j) bt[j * k + kk] = b[kk * n + j];
        std::vector<float> p1(DensePackedSize(k, n), -7.0f), p2(DensePackedSize(k, n), -7.0f);  // -7: not written
        PackDenseCols(b.data(), k, n, n, p1.data(), 0, k / 2);  // in two ranges, as two threads would
        PackDenseCols(b.data(), k, n, n, p1.data(), k / 2);
        PackDenseRows(bt.data(), n, k, k, p2.data(), 0, n / 3);
        PackDenseRows(bt.data(), n, k, k, p2.data(), n / 3);
        ASSERT_EQ(p1, p2);
        ASSERT_EQ(std::count(p1.begin(), p1.end(), -7.0f), 0);
        const int64_t ldc = n + 3;
        std::vector<float> c(static_cast<size_t>(m * ldc), 0.5f), acc = c;
        DenseProduct(a.data(), m, lda, p1.data(), k, n, c.data(), ldc, false);
        DenseProduct(a.data(), m, lda, p1.data(), k, n, acc.data(), ldc, true);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_TRUE(SameBits(c[i * ldc + j], ScalarOrder(&a[i * lda], b.data(), k, n, j, 0.0f, false)))
                << m << "x" << n << "x" << k << " at " << i << "," << j;
            ASSERT_TRUE(SameBits(acc[i * ldc + j], ScalarOrder(&a[i * lda], b.data(), k, n, j, 0.5f, true)));
          }
          for (int64_t j = n; j < ldc; ++j) {
            ASSERT_EQ(c[i * ldc + j], 0.5f) << "wrote past the columns";
            ASSERT_EQ(acc[i * ldc + j], 0.5f) << "wrote past the columns";
          }
        }
      }
    }
  }
}

TEST(Dense, MatMulIsBatchAndThreadInvariantAndNearFp64) {
  std::mt19937 rng(11);
  for (model::MatrixFormat format : {model::MatrixFormat::kF32, model::MatrixFormat::kBF16}) {
    const TestMatrix w = MakeTestMatrix(format, 70, 300, 1, rng);
    const int64_t n = 130;
    const std::vector<float> x = RandomVector(n * 300, rng);
    std::vector<float> y1(n * 70), y2(n * 70), one(70), want(n * 70);
    base::AlignedVector<float> packed;
    base::ThreadPool single(1), two(2);
    DenseMatMul(w.matrix, x.data(), n, 300, y1.data(), 70, packed, single);
    DenseMatMul(w.matrix, x.data(), n, 300, y2.data(), 70, packed, two);
    EXPECT_EQ(y1, y2);
    DenseMatMul(w.matrix, x.data() + 77 * 300, 1, 300, one.data(), 70, packed, two);
    EXPECT_EQ(one, std::vector<float>(y1.begin() + 77 * 70, y1.begin() + 78 * 70));
    MatMulReference(w.matrix, x.data(), n, 300, want.data(), 70);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y1[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << i;
  }
}

TEST(Dense, EveryIsaGivesTheSameBits) {
  std::mt19937 rng(5);
  const int64_t m = 29, n = 145, k = 1100;
  const std::vector<float> a = RandomVector(m * k, rng), b = RandomVector(k * n, rng);
  std::vector<internal::DenseKernel> kernels = {internal::DensePortable()};
  if (IsaSupported(Isa::kAvx2)) kernels.push_back(internal::DenseAvx2());
  if (IsaSupported(Isa::kAvx512)) kernels.push_back(internal::DenseAvx512());
  std::vector<float> first;
  for (const internal::DenseKernel& kernel : kernels) {
    std::vector<float> packed((n + kernel.panel - 1) / kernel.panel * kernel.panel * k), c(m * n);
    internal::PackDenseColsAs(kernel.panel, b.data(), k, n, n, packed.data(), 0, k);
    kernel.product(a.data(), m, k, packed.data(), k, n, c.data(), n, false);
    if (first.empty()) first = c;
    EXPECT_EQ(c, first) << "panel width " << kernel.panel;
  }
  std::cout << kernels.size() << " kernels compared\n";
}

}  // namespace
}  // namespace flashserve::kernels
