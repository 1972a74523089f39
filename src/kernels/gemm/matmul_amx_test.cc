// The AMX matrix products (gemm/matmul_amx.cc through internal::MatMulAmx): close to the fp64
// reference, each row's bits independent of its batch, thread count and position, rows that
// are not exact BF16 sent to the AVX-512 paths with those paths' bits, and the process switch.
// Skipped where the CPU has no AMX.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm/matmul.h"
#include "kernels/gemm/matmul_internal.h"
#include "kernels/test_matrices.h"

namespace flashserve::kernels {
namespace {

using internal::MatMulAmx;
using model::MatrixFormat;

// Activations as the QAT emulation leaves them before an FP8 or FP4 product: exact BF16 values.
std::vector<float> Bf16Vector(int64_t n, std::mt19937& rng) {
  std::vector<float> x = RandomVector(n, rng);
  for (float& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
  return x;
}

struct Case {
  MatrixFormat format;
  int64_t rows, cols;
  int tile;
  bool lane_pairs;
};

// Row tails (rows % 16 != 0), several steps and FP8 bands, both FP4 layouts, K of one step.
const Case kCases[] = {{MatrixFormat::kFp4, 37, 416, 32, false}, {MatrixFormat::kFp4, 40, 416, 32, true},
                       {MatrixFormat::kFp4, 5, 32, 32, false},    {MatrixFormat::kFp4, 304, 1024, 32, true},
                       {MatrixFormat::kFp8, 37, 416, 32, false},  {MatrixFormat::kFp8, 140, 1024, 128, false},
                       {MatrixFormat::kFp8, 21, 64, 64, false}};

struct Weights {
  TestMatrix tm;
  std::vector<uint8_t> packed;
  model::Matrix matrix;
};

Weights MakeWeights(const Case& c, std::mt19937& rng) {
  Weights w{MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng), {}, {}};
  w.matrix = w.tm.matrix;
  if (c.lane_pairs) {
    w.packed.resize(static_cast<size_t>(w.matrix.StoredBytes()));
    w.matrix = w.tm.matrix.RepackFp4LanePairs(w.packed.data());
  }
  return w;
}

class MatMulAmxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!AmxSupported()) GTEST_SKIP() << "this CPU (or kernel) gives this process no AMX tiles";
  }
};

TEST_F(MatMulAmxTest, TakesFp4AndFp8WithWholeStepsOnly) {
  std::mt19937 rng(3);
  for (const Case& c : kCases) EXPECT_TRUE(internal::AmxTakes(MakeWeights(c, rng).matrix)) << c.rows << "x" << c.cols;
  EXPECT_TRUE(internal::AmxTakes(MakeTestMatrix(MatrixFormat::kBF16, 32, 64, 1, rng).matrix));  // split activations
  EXPECT_FALSE(internal::AmxTakes(MakeTestMatrix(MatrixFormat::kBF16, 32, 80, 1, rng).matrix));  // 80 % 32
  EXPECT_FALSE(internal::AmxTakes(MakeTestMatrix(MatrixFormat::kF32, 32, 64, 1, rng).matrix));
  EXPECT_FALSE(internal::AmxTakes(MakeTestMatrix(MatrixFormat::kFp8, 32, 200, 32, rng).matrix));  // 200 % 32
  EXPECT_FALSE(internal::AmxTakes(MakeTestMatrix(MatrixFormat::kFp8, 32, 256, 16, rng).matrix));  // two scales a step
  TestMatrix tiny = MakeTestMatrix(MatrixFormat::kFp4, 16, 64, 32, rng);
  tiny.scale[0] = 1;  // 2^-126 times e2m1's 0.5: not a normal BF16
  EXPECT_FALSE(internal::AmxTakes(tiny.matrix));
}

TEST_F(MatMulAmxTest, MatchesReference) {
  std::mt19937 rng(5);
  base::ThreadPool pool(3);
  for (const Case& c : kCases) {
    const Weights w = MakeWeights(c, rng);
    const int64_t max_n = 53;
    std::vector<float> x = Bf16Vector(max_n * c.cols, rng), ref(max_n * c.rows);
    MatMulReference(w.matrix, x.data(), max_n, c.cols, ref.data(), c.rows);
    for (int64_t n : {1, 2, 15, 16, 17, 48, 53}) {
      std::vector<float> got(n * c.rows, NAN);
      MatMulAmx(w.matrix, x.data(), n, c.cols, got.data(), c.rows, pool);
      double max_ref = 1e-6;
      for (float v : ref) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
      for (int64_t i = 0; i < n * c.rows; ++i)
        ASSERT_NEAR(ref[i], got[i], 2e-6 * max_ref) << w.matrix.Describe() << " n=" << n << " at " << i;
    }
  }
}

// One-hot activation rows pick single weights, which AMX returns unrounded: every FP8 code
// (subnormals, zero, the NaN code read as 480, both signs) and every FP4 code, at the smallest
// and largest scales AMX takes, decode to exactly the reference's values.
TEST_F(MatMulAmxTest, DecodesEveryCodeExactly) {
  std::mt19937 rng(17);
  base::ThreadPool pool(2);
  struct Shape {
    MatrixFormat format;
    bool lane_pairs;
  };
  for (Shape shape : {Shape{MatrixFormat::kFp8, false}, Shape{MatrixFormat::kFp4, false}, Shape{MatrixFormat::kFp4, true}}) {
    const bool fp8 = shape.format == MatrixFormat::kFp8;
    Weights w = MakeWeights({shape.format, 32, 256, 32, false}, rng);
    for (size_t i = 0; i < w.tm.data.size(); ++i) w.tm.data[i] = static_cast<uint8_t>(i * 7 + i / 256);  // every byte
    for (size_t i = 0; i < w.tm.scale.size(); ++i) {
      const uint8_t lo = fp8 ? 10 : 2, hi = fp8 ? 246 : 252;
      w.tm.scale[i] = i % 3 == 0 ? lo : i % 3 == 1 ? hi : 127;
    }
    w.matrix = w.tm.matrix;
    if (shape.lane_pairs) {
      w.packed.resize(static_cast<size_t>(w.matrix.StoredBytes()));
      w.matrix = w.tm.matrix.RepackFp4LanePairs(w.packed.data());
    }
    ASSERT_TRUE(internal::AmxTakes(w.matrix));
    std::vector<float> want(32 * 256);
    DequantizeRows(w.matrix, 0, 32, want.data());
    for (int64_t e = 0; e < 32 * 256; ++e) {  // the NaN code (absent from checkpoints) reads as 480
      if (!std::isnan(want[e])) continue;
      const uint8_t code = w.tm.data[e], scale = w.tm.scale[(e / 256 / 32) * w.matrix.scale_cols + e % 256 / 32];
      want[e] = (code & 0x80 ? -480.0f : 480.0f) * model::E8m0ToFloat(scale);
    }
    for (int64_t n : {1, 5, 16, 40}) {  // narrow, full and several blocks
      for (int64_t c0 = 0; c0 < 256; c0 += n) {
        const int64_t rows = std::min<int64_t>(n, 256 - c0);
        std::vector<float> x(rows * 256, 0.0f), y(rows * 32);
        for (int64_t i = 0; i < rows; ++i) x[i * 256 + c0 + i] = 1.0f;
        MatMulAmx(w.matrix, x.data(), rows, 256, y.data(), 32, pool);
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t o = 0; o < 32; ++o)
            ASSERT_EQ(want[o * 256 + c0 + i], y[i * 32 + o])  // (-0 weights sum with +0 products to +0)
                << w.matrix.Describe() << " n=" << n << " weight (" << o << ", " << c0 + i << ")";
      }
    }
  }
}

// The engine's contract: a row's output is the same bits whatever else shares the call, on any
// pool. Rows that are not exact BF16 take the AVX-512 paths with FP4 weights, and so have their
// bits, in any batch; with FP8 weights they are split into three exact BF16 parts on the tiles
// (as close to the fp64 reference as the f32 paths, and bits of their own).
TEST_F(MatMulAmxTest, RowsAreBitIdenticalWhateverTheBatchAndThreads) {
  std::mt19937 rng(7);
  base::ThreadPool p1(1), p2(2), p3(3);
  base::ThreadPool* pools[] = {&p1, &p2, &p3};
  for (const Case& c : kCases) {
    const Weights w = MakeWeights(c, rng);
    // Up to 69 rows: batches from 64 rows on check their rows on the pool (matmul.cc SplitRows).
    const int64_t max_n = 72, ldx = c.cols + 3, ldy = c.rows + 5;
    std::vector<float> x = Bf16Vector(max_n * ldx, rng);
    for (int64_t bad : {7, 31, 32}) x[bad * ldx + 1] = 0.1f;  // not BF16 values: AVX-512 rows
    std::vector<float> alone(max_n * c.rows), avx512(c.rows);
    for (int64_t i = 0; i < max_n; ++i)
      MatMulAmx(w.matrix, x.data() + i * ldx, 1, c.cols, alone.data() + i * c.rows, c.rows, p1);
    ASSERT_EQ(internal::AmxSplits(w.matrix), c.format == MatrixFormat::kFp8) << w.matrix.Describe();
    for (int64_t bad : {7, 31, 32}) {
      internal::MatMulWithIsa(Isa::kAvx512, w.matrix, x.data() + bad * ldx, 1, c.cols, avx512.data(), c.rows, p1);
      const bool same = std::memcmp(avx512.data(), alone.data() + bad * c.rows, c.rows * sizeof(float)) == 0;
      if (!internal::AmxSplits(w.matrix)) {
        ASSERT_TRUE(same) << w.matrix.Describe() << " row " << bad << ": not the AVX-512 bits";
        continue;
      }
      if (c.cols >= 416) {
        EXPECT_FALSE(same) << w.matrix.Describe() << " row " << bad << ": split rows have the tiles' bits";
      }
      std::vector<float> ref(c.rows);
      MatMulReference(w.matrix, x.data() + bad * ldx, 1, c.cols, ref.data(), c.rows);
      double max_ref = 1e-6;
      for (float v : ref) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
      for (int64_t o = 0; o < c.rows; ++o)
        ASSERT_NEAR(ref[o], alone[bad * c.rows + o], 2e-6 * max_ref) << w.matrix.Describe() << " row " << bad << " out " << o;
    }
    int differ = 0;  // AMX rows have their own bits
    internal::MatMulWithIsa(Isa::kAvx512, w.matrix, x.data(), 1, c.cols, avx512.data(), c.rows, p1);
    for (int64_t o = 0; o < c.rows; ++o) differ += avx512[o] != alone[o];
    if (c.cols >= 416) {
      EXPECT_GT(differ, 0) << w.matrix.Describe() << ": AMX should not be the f32 order";
    }
    for (int64_t n = 1; n <= max_n; n += n < 20 ? 1 : 7) {
      base::ThreadPool& pool = *pools[n % 3];
      for (int64_t first : {int64_t{0}, max_n - n}) {
        std::vector<float> batched(n * ldy);
        MatMulAmx(w.matrix, x.data() + first * ldx, n, ldx, batched.data(), ldy, pool);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(0, std::memcmp(alone.data() + (first + i) * c.rows, batched.data() + i * ldy,
                                   c.rows * sizeof(float)))
              << w.matrix.Describe() << " n=" << n << " row " << first + i << " threads=" << pool.num_threads();
      }
    }
  }
}

// A row of a weight slice has the bits it has in the whole matrix: the tile row a weight row
// lands in (row 13 of the matrix is row 0 of the slice from 13) does not matter.
TEST_F(MatMulAmxTest, WeightRowBitsDoNotDependOnTheirTileRow) {
  std::mt19937 rng(9);
  base::ThreadPool pool(2);
  const Weights w = MakeWeights({MatrixFormat::kFp4, 64, 256, 32, false}, rng);
  std::vector<float> x = Bf16Vector(5 * 256, rng), whole(5 * 64), part(5 * 64);
  MatMulAmx(w.matrix, x.data(), 5, 256, whole.data(), 64, pool);
  for (int64_t begin : {8, 13, 32}) {
    const model::Matrix slice = w.matrix.RowSlice(begin, 64);
    MatMulAmx(slice, x.data(), 5, 256, part.data(), 64, pool);
    for (int64_t i = 0; i < 5; ++i)
      ASSERT_EQ(0, std::memcmp(whole.data() + i * 64 + begin, part.data() + i * 64, (64 - begin) * sizeof(float)))
          << "slice from " << begin << " row " << i;
  }
}

// BF16 weights (the output head), and FP8 weights (decoded as the products run against up to
// two blocks, a panel at a time against more), with f32 activations split into three exact
// BF16 parts: as close to the fp64 reference as the f32 paths, every row's bits the same in any
// batch (one block, two, a pair and a single one) and on any pool, a last panel that runs past
// the matrix's end (37 rows) read correctly, fewer steps than the ring runs ahead (64 columns).
TEST_F(MatMulAmxTest, SplitActivationsTakeEveryRowExactly) {
  std::mt19937 rng(19);
  base::ThreadPool p1(1), p2(2), p3(3);
  base::ThreadPool* pools[] = {&p1, &p2, &p3};
  for (const Case& c : {Case{MatrixFormat::kBF16, 37, 416, 1, false}, Case{MatrixFormat::kBF16, 64, 1024, 1, false},
                        Case{MatrixFormat::kBF16, 5, 32, 1, false}, Case{MatrixFormat::kFp8, 37, 416, 32, false},
                        Case{MatrixFormat::kFp8, 140, 1024, 128, false}, Case{MatrixFormat::kFp8, 21, 64, 32, false}}) {
    const Weights weights = MakeWeights(c, rng);
    const model::Matrix& w = weights.matrix;
    const int64_t rows = c.rows, cols = c.cols;
    ASSERT_EQ(kernels::AmxPasses(w, false), internal::kAmxSplitParts);
    const int64_t max_n = 40, ldx = cols + 3, ldy = rows + 5;
    std::vector<float> x = RandomVector(max_n * ldx, rng), ref(max_n * rows), alone(max_n * rows), avx512(rows);
    x[3 * ldx] = 1e-30f;  // parts below the normal BF16 range
    x[4 * ldx + 1] = -1.0e30f;  // a row of large results
    std::vector<float> packed_x(max_n * cols);
    for (int64_t i = 0; i < max_n; ++i) std::copy_n(x.data() + i * ldx, cols, packed_x.data() + i * cols);
    MatMulReference(w, packed_x.data(), max_n, cols, ref.data(), rows);
    for (int64_t i = 0; i < max_n; ++i) MatMulAmx(w, x.data() + i * ldx, 1, cols, alone.data() + i * rows, rows, p1);
    for (int64_t i = 0; i < max_n; ++i) {  // each row against its own largest result
      double max_ref = 1e-6;
      for (int64_t o = 0; o < rows; ++o) max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i * rows + o])));
      for (int64_t o = 0; o < rows; ++o)
        ASSERT_NEAR(ref[i * rows + o], alone[i * rows + o], 2e-6 * max_ref) << w.Describe() << " row " << i << " out " << o;
    }
    internal::MatMulWithIsa(Isa::kAvx512, w, x.data(), 1, cols, avx512.data(), rows, p1);
    if (cols >= 416) {
      int differ = 0;
      for (int64_t o = 0; o < rows; ++o) differ += avx512[o] != alone[o];
      EXPECT_GT(differ, 0) << w.Describe() << ": AMX should not be the f32 order";
    }
    for (int64_t n = 1; n <= max_n; n += n < 18 ? 1 : 11) {
      base::ThreadPool& pool = *pools[n % 3];
      for (int64_t first : {int64_t{0}, max_n - n}) {
        std::vector<float> batched(n * ldy);
        MatMulAmx(w, x.data() + first * ldx, n, ldx, batched.data(), ldy, pool);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(0, std::memcmp(alone.data() + (first + i) * rows, batched.data() + i * ldy, rows * sizeof(float)))
              << w.Describe() << " n=" << n << " row " << first + i << " threads=" << pool.num_threads();
      }
    }
  }
}

// Few weight rows (the router's 64, one task): groups of activation rows run side by side on
// the threads, each packed by its own thread; every row keeps the bits it has alone.
TEST_F(MatMulAmxTest, FewWeightRowsSplitKeepsEachRowsBits) {
  std::mt19937 rng(29);
  base::ThreadPool p1(1), p2(2), p3(3);
  for (MatrixFormat format : {MatrixFormat::kFp4, MatrixFormat::kBF16}) {
    TestMatrix tm = MakeTestMatrix(format, 24, 4096, 32, rng);
    const model::Matrix& w = tm.matrix;
    const int64_t max_n = 75, ldx = 4096 + 1, ldy = 24 + 3;
    ASSERT_GT(internal::ActivationRowGroups(w, max_n, 1, 3), 1);
    std::vector<float> x = format == MatrixFormat::kBF16 ? RandomVector(max_n * ldx, rng) : Bf16Vector(max_n * ldx, rng);
    std::vector<float> alone(max_n * 24);
    for (int64_t i = 0; i < max_n; ++i) MatMulAmx(w, x.data() + i * ldx, 1, 4096, alone.data() + i * 24, 24, p1);
    for (int64_t n : {2, 9, 17, 40, 75})
      for (base::ThreadPool* pool : {&p2, &p3}) {
        std::vector<float> batched(n * ldy);
        MatMulAmx(w, x.data(), n, ldx, batched.data(), ldy, *pool);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(0, std::memcmp(alone.data() + i * 24, batched.data() + i * ldy, 24 * sizeof(float)))
              << w.Describe() << " n=" << n << " row " << i << " threads=" << pool->num_threads();
      }
  }
}

TEST_F(MatMulAmxTest, ProcessSwitch) {
  EXPECT_TRUE(AmxOn());  // on by default where supported
  SetAmx(false);
  EXPECT_FALSE(AmxOn());
  std::mt19937 rng(13);
  base::ThreadPool pool(2);
  const Weights w = MakeWeights({MatrixFormat::kFp4, 48, 512, 32, false}, rng);
  std::vector<float> x = Bf16Vector(3 * 512, rng), off(3 * 48), avx512(3 * 48), on(3 * 48);
  MatMul(w.matrix, x.data(), 3, 512, off.data(), 48, pool);
  internal::MatMulWithIsa(Isa::kAvx512, w.matrix, x.data(), 3, 512, avx512.data(), 48, pool);
  EXPECT_EQ(0, std::memcmp(off.data(), avx512.data(), off.size() * sizeof(float)));
  SetAmx(true);
  MatMul(w.matrix, x.data(), 3, 512, on.data(), 48, pool);
  MatMulAmx(w.matrix, x.data(), 3, 512, avx512.data(), 48, pool);
  EXPECT_EQ(0, std::memcmp(on.data(), avx512.data(), on.size() * sizeof(float)));
}

}  // namespace
}  // namespace flashserve::kernels
