#include "kernels/gemm/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/test_matrices.h"

namespace flashserve::kernels {
namespace {

using model::MatrixFormat;

void ExpectClose(const std::vector<float>& ref, const std::vector<float>& got, double tol, const std::string& what) {
  ASSERT_EQ(ref.size(), got.size());
  double max_ref = 1e-6;
  for (float v : ref) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(ref[i], got[i], tol * max_ref) << what << " at " << i;
}

TEST(MatMulTest, MatchesReferenceAcrossFormatsAndAwkwardShapes) {
  base::ThreadPool pool(3);
  std::mt19937 rng(7);
  for (MatrixFormat format : {MatrixFormat::kF32, MatrixFormat::kBF16, MatrixFormat::kF16, MatrixFormat::kFp8,
                              MatrixFormat::kFp4}) {
    for (int64_t rows : {1, 5, 17, 130}) {
      for (int64_t cols : {32, 96, 160, 288}) {
        for (int tile : {128, 32}) {
          TestMatrix tm = MakeTestMatrix(format, rows, cols, tile, rng);
          for (int64_t n : {1, 2, 7, 33}) {
            std::vector<float> x = RandomVector(n * cols, rng);
            std::vector<float> ref(n * rows), got(n * rows);
            MatMulReference(tm.matrix, x.data(), n, cols, ref.data(), rows);
            MatMul(tm.matrix, x.data(), n, cols, got.data(), rows, pool);
            ExpectClose(ref, got, 1e-5, tm.matrix.Describe() + " n=" + std::to_string(n));
          }
        }
      }
    }
  }
}

TEST(MatMulTest, RowsAreBitIdenticalWhateverTheBatchAndThreads) {
  std::mt19937 rng(11);
  base::ThreadPool one(1), many(4);
  for (MatrixFormat format : {MatrixFormat::kBF16, MatrixFormat::kFp8, MatrixFormat::kFp4}) {
    TestMatrix tm = MakeTestMatrix(format, 300, 416, 128, rng);
    const int64_t n = 37;
    std::vector<float> x = RandomVector(n * 416, rng);
    std::vector<float> batched(n * 300);
    MatMul(tm.matrix, x.data(), n, 416, batched.data(), 300, many);
    for (int64_t i : {0, 5, 36}) {
      std::vector<float> alone(300);
      MatMul(tm.matrix, x.data() + i * 416, 1, 416, alone.data(), 300, one);
      EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + i * 300, 300 * sizeof(float)))
          << tm.matrix.Describe() << " row " << i;
    }
  }
}

TEST(MatMulTest, StridedInputsAndOutputs) {
  std::mt19937 rng(3);
  base::ThreadPool pool(2);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 64, 128, 128, rng);
  const int64_t n = 3, ldx = 200, ldy = 90;
  std::vector<float> x = RandomVector(n * ldx, rng);
  std::vector<float> ref(n * ldy, -7.0f), got(n * ldy, -7.0f);
  MatMulReference(tm.matrix, x.data(), n, ldx, ref.data(), ldy);
  MatMul(tm.matrix, x.data(), n, ldx, got.data(), ldy, pool);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 64; o < ldy; ++o) EXPECT_EQ(got[i * ldy + o], -7.0f);  // padding untouched
  ExpectClose(ref, got, 1e-5, "strided");
}

}  // namespace
}  // namespace flashserve::kernels
