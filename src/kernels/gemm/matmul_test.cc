#include "kernels/gemm/matmul.h"

#include <gtest/gtest.h>
#include <time.h>
#include <xmmintrin.h>

#include <bit>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm/matmul_internal.h"
#include "kernels/test_matrices.h"

namespace flashserve::kernels {
namespace {

using internal::MatMulWithIsa;
using model::MatrixFormat;

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) out.push_back(isa);
  return out;
}

// Compares the first n rows (stride ld) of got with ref, relative to the largest |ref|.
void ExpectClose(const std::vector<float>& ref, const std::vector<float>& got, int64_t n, int64_t rows, int64_t ld,
                 double tol, const std::string& what) {
  double max_ref = 1e-6;
  for (int64_t i = 0; i < n * rows; ++i) max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < rows; ++o)
      ASSERT_NEAR(ref[i * rows + o], got[i * ld + o], tol * max_ref) << what << " row " << i << " out " << o;
}

// Runs every ISA and each n in ns against one fp64 reference over the largest n.
void CheckAgainstReference(const TestMatrix& tm, const std::vector<int64_t>& ns, std::mt19937& rng,
                           base::ThreadPool& pool) {
  const model::Matrix& w = tm.matrix;
  const int64_t max_n = ns.back();
  std::vector<float> x = RandomVector(max_n * w.cols, rng);
  std::vector<float> ref(max_n * w.rows);
  MatMulReference(w, x.data(), max_n, w.cols, ref.data(), w.rows);
  for (Isa isa : SupportedIsas()) {
    for (int64_t n : ns) {
      std::vector<float> got(n * w.rows, NAN);
      MatMulWithIsa(isa, w, x.data(), n, w.cols, got.data(), w.rows, pool);
      ExpectClose(ref, got, n, w.rows, w.rows, 2e-6,
                  w.Describe() + " " + IsaName(isa) + " n=" + std::to_string(n));
    }
  }
}

TEST(MatMulTest, MatchesReferenceAcrossFormatsAndAwkwardShapes) {
  base::ThreadPool pool(3);
  std::mt19937 rng(7);
  const std::vector<int64_t> ns = {1, 2, 3, 4, 5, 7, 8, 13, 40};
  for (MatrixFormat format : {MatrixFormat::kF32, MatrixFormat::kBF16, MatrixFormat::kF16, MatrixFormat::kFp8,
                              MatrixFormat::kFp4}) {
    std::vector<int64_t> cols = {32, 96, 160, 288};
    if (format != MatrixFormat::kFp8 && format != MatrixFormat::kFp4) cols.insert(cols.end(), {1, 7, 45, 100});
    if (format == MatrixFormat::kFp8) cols.insert(cols.end(), {8, 50, 136});
    for (int64_t rows : {1, 3, 17, 130}) {
      for (int64_t c : cols) {
        for (int tile : {128, 32}) {
          if (tile == 32 && format != MatrixFormat::kFp8) continue;
          TestMatrix tm = MakeTestMatrix(format, rows, c, tile, rng);
          CheckAgainstReference(tm, ns, rng, pool);
        }
      }
    }
  }
}

TEST(MatMulTest, MatchesReferenceOnLargeShapes) {
  base::ThreadPool pool(2);
  std::mt19937 rng(5);
  const std::vector<int64_t> ns = {1, 9, 17};  // in-register decode (one and two passes), then panels
  for (int tile : {128, 32}) {
    TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 1000, 4096, tile, rng);
    CheckAgainstReference(tm, ns, rng, pool);
  }
  TestMatrix fp4 = MakeTestMatrix(MatrixFormat::kFp4, 1000, 4096, 32, rng);
  CheckAgainstReference(fp4, ns, rng, pool);
}

// FP8 matrices the vector decoder does not take (tiles that are not a power of two, tiles
// narrower than a vector, a scale whose folded factor would overflow) use exact scalar panels.
TEST(MatMulTest, Fp8FallbackPanelsMatchReference) {
  base::ThreadPool pool(2);
  std::mt19937 rng(13);
  const std::vector<int64_t> ns = {1, 2, 5, 40};
  for (int tile : {48, 8, 24}) {
    TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 70, 200, tile, rng);
    CheckAgainstReference(tm, ns, rng, pool);
  }
  TestMatrix big = MakeTestMatrix(MatrixFormat::kFp8, 40, 256, 32, rng);
  big.scale[3] = 250;  // tile (0, 3): codes kept small so that values stay finite
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t c = 96; c < 128; ++c) big.data[r * 256 + c] &= 0x87;
  CheckAgainstReference(big, ns, rng, pool);
}

float DocumentedOrder(const float* w_row, const float* x, int64_t cols, Isa isa, bool fp4) {
  return DocumentedOrderDot(w_row, x, cols, internal::IsaLanes(isa), isa == Isa::kGeneric, fp4);
}

TEST(MatMulTest, EveryPathFollowsTheDocumentedReductionOrder) {
  std::mt19937 rng(29);
  base::ThreadPool pool(2);
  struct Case {
    MatrixFormat format;
    int64_t cols;
    int tile;
  };
  const Case cases[] = {{MatrixFormat::kF32, 203, 1},  {MatrixFormat::kBF16, 203, 1}, {MatrixFormat::kF16, 40, 1},
                        {MatrixFormat::kFp8, 200, 128}, {MatrixFormat::kFp8, 200, 32}, {MatrixFormat::kFp8, 200, 48},
                        {MatrixFormat::kFp4, 192, 32}};
  for (const Case& c : cases) {
    TestMatrix tm = MakeTestMatrix(c.format, 13, c.cols, c.tile, rng);
    std::vector<float> dequant(13 * c.cols);
    DequantizeRows(tm.matrix, 0, 13, dequant.data());
    std::vector<float> x = RandomVector(17 * c.cols, rng);
    for (Isa isa : SupportedIsas()) {
      for (int64_t n : {1, 2, 5, 9, 17}) {  // scaled activations, in-register decode, passes, panels
        std::vector<float> y(n * 13);
        MatMulWithIsa(isa, tm.matrix, x.data(), n, c.cols, y.data(), 13, pool);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t o = 0; o < 13; ++o) {
            const float want = DocumentedOrder(dequant.data() + o * c.cols, x.data() + i * c.cols, c.cols, isa,
                                               c.format == MatrixFormat::kFp4);
            ASSERT_EQ(0, std::memcmp(&want, &y[i * 13 + o], sizeof want))
                << tm.matrix.Describe() << " " << IsaName(isa) << " n=" << n << " (" << i << ", " << o << ")";
          }
      }
    }
  }
}

// The engine's contract: a row's output is the same bits whatever else shares the call.
TEST(MatMulTest, RowsAreBitIdenticalWhateverTheBatchAndThreads) {
  std::mt19937 rng(11);
  struct Case {
    MatrixFormat format;
    int64_t rows, cols;
    int tile;
  };
  const Case cases[] = {{MatrixFormat::kF32, 37, 301, 1},   {MatrixFormat::kBF16, 37, 301, 1},
                        {MatrixFormat::kF16, 37, 75, 1},    {MatrixFormat::kFp8, 37, 416, 128},
                        {MatrixFormat::kFp8, 37, 200, 32},  {MatrixFormat::kFp8, 21, 200, 48},
                        {MatrixFormat::kFp4, 37, 416, 32},  {MatrixFormat::kFp4, 5, 64, 32},
                        // Several 64 KiB row blocks for the multi-pass path (n > 8).
                        {MatrixFormat::kBF16, 130, 1040, 1}, {MatrixFormat::kFp8, 140, 1024, 128},
                        {MatrixFormat::kFp4, 100, 2048, 32}};
  std::vector<base::ThreadPool*> pools;
  base::ThreadPool p1(1), p2(2), p3(3), p4(4);
  pools = {&p1, &p2, &p3, &p4};
  const int64_t max_n = 40;
  for (const Case& c : cases) {
    TestMatrix tm = MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng);
    const model::Matrix& w = tm.matrix;
    const int64_t ldx = c.cols + 3, ldy = c.rows + 5;
    std::vector<float> x = RandomVector(max_n * ldx, rng);
    for (Isa isa : SupportedIsas()) {
      std::vector<float> alone(max_n * c.rows);
      for (int64_t i = 0; i < max_n; ++i)
        MatMulWithIsa(isa, w, x.data() + i * ldx, 1, c.cols, alone.data() + i * c.rows, c.rows, p1);
      for (int64_t n = 1; n <= max_n; ++n) {
        base::ThreadPool& pool = *pools[n % pools.size()];
        for (int64_t first : {int64_t{0}, max_n - n}) {
          std::vector<float> batched(n * ldy);
          MatMulWithIsa(isa, w, x.data() + first * ldx, n, ldx, batched.data(), ldy, pool);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(0, std::memcmp(alone.data() + (first + i) * c.rows, batched.data() + i * ldy,
                                     c.rows * sizeof(float)))
                << w.Describe() << " " << IsaName(isa) << " n=" << n << " row " << first + i
                << " threads=" << pool.num_threads();
        }
      }
    }
  }
}

// Few weight rows (one task of rows, as the hyper-connection mixes: 24 x 4096): many activation
// rows are split over the threads instead; either way each row has the bits it has alone.
TEST(MatMulTest, FewWeightRowsSplitKeepsEachRowsBits) {
  std::mt19937 rng(23);
  struct Case {
    MatrixFormat format;
    int64_t rows, cols;
    int tile;
  };
  const Case cases[] = {{MatrixFormat::kF32, 24, 4096, 1}, {MatrixFormat::kBF16, 16, 2048, 1},
                        {MatrixFormat::kFp4, 12, 4096, 32}, {MatrixFormat::kF32, 5, 1000, 1},
                        {MatrixFormat::kFp8, 8, 4096, 128}};  // prescaled activations per group
  base::ThreadPool p1(1), p2(2), p3(3);
  for (const Case& c : cases) {
    TestMatrix tm = MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng);
    const model::Matrix& w = tm.matrix;
    const int64_t max_n = 75, ldx = c.cols + 1, ldy = c.rows + 3;
    EXPECT_GT(internal::ActivationRowGroups(w, max_n, 1, 3), 1) << w.Describe();
    std::vector<float> x = RandomVector(max_n * ldx, rng);
    for (Isa isa : SupportedIsas()) {
      std::vector<float> alone(max_n * c.rows);
      for (int64_t i = 0; i < max_n; ++i)
        MatMulWithIsa(isa, w, x.data() + i * ldx, 1, c.cols, alone.data() + i * c.rows, c.rows, p1);
      for (int64_t n : {2, 8, 9, 17, 40, 63, 75}) {
        for (base::ThreadPool* pool : {&p2, &p3}) {
          std::vector<float> batched(n * ldy);
          MatMulWithIsa(isa, w, x.data(), n, ldx, batched.data(), ldy, *pool);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(0, std::memcmp(alone.data() + i * c.rows, batched.data() + i * ldy, c.rows * sizeof(float)))
                << w.Describe() << " " << IsaName(isa) << " n=" << n << " row " << i
                << " threads=" << pool->num_threads();
        }
      }
    }
  }
}

// Every activation row count from 1 to 33 (one register tile, wide tiles, passes, scaled FP8
// activations) on awkward shapes: row tails, column tails, several FP8 bands, rows that end
// mid-tile, against the fp64 reference.
TEST(MatMulTest, EveryRowCountMatchesReference) {
  base::ThreadPool pool(2);
  std::mt19937 rng(41);
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 33; ++n) ns.push_back(n);
  struct Case {
    MatrixFormat format;
    int64_t rows, cols;
    int tile;
  };
  const Case cases[] = {{MatrixFormat::kBF16, 67, 1040, 1}, {MatrixFormat::kBF16, 5, 45, 1},
                        {MatrixFormat::kF16, 29, 100, 1},   {MatrixFormat::kF32, 19, 203, 1},
                        {MatrixFormat::kFp8, 300, 320, 128}, {MatrixFormat::kFp8, 71, 200, 32},
                        {MatrixFormat::kFp8, 9, 136, 8},     {MatrixFormat::kFp4, 67, 1024, 32},
                        {MatrixFormat::kFp4, 3, 96, 32}};
  for (const Case& c : cases)
    CheckAgainstReference(MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng), ns, rng, pool);
}

// FP8 decode may scale activations instead of weights, which is exact only for activations
// away from the subnormal range and from overflow; tiny or huge activations (each FP8 route
// fails in turn: the DecodeFp8Low factors overflow first, then the f16 ones) must still give
// every row the bits it gets alone, in every batch size.
TEST(MatMulTest, ExtremeActivationsKeepFp8RowsBitIdentical) {
  std::mt19937 rng(23);
  base::ThreadPool pool(2);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 200, 256, 32, rng);
  const int64_t max_n = 20;
  for (float magnitude : {1e-39f, 3e-36f, 1.0f, 1e20f, 1e32f, 1e36f}) {
    std::vector<float> x = RandomVector(max_n * 256, rng, magnitude);
    if (magnitude == 1.0f) x[7 * 256 + 3] = 1e37f;  // one huge value: batches with row 7 fall back
    for (Isa isa : SupportedIsas()) {
      std::vector<float> alone(max_n * 200);
      for (int64_t i = 0; i < max_n; ++i)
        MatMulWithIsa(isa, tm.matrix, x.data() + i * 256, 1, 256, alone.data() + i * 200, 200, pool);
      for (int64_t n = 2; n <= max_n; ++n) {
        std::vector<float> batched(n * 200);
        MatMulWithIsa(isa, tm.matrix, x.data(), n, 256, batched.data(), 200, pool);
        EXPECT_EQ(0, std::memcmp(alone.data(), batched.data(), batched.size() * sizeof(float)))
            << IsaName(isa) << " magnitude " << magnitude << " n=" << n;
      }
    }
  }
}

// FP8 decodes without the f16 conversion where every scale byte is <= 134 and through f16
// above: the same codes with every scale 2^12 larger (all bytes > 134) must give outputs 2^12
// larger, bit for bit, on every path (scaled activations, in-register decode, passes, panels).
TEST(MatMulTest, BothFp8DecodersGiveTheSameBits) {
  std::mt19937 rng(31);
  base::ThreadPool pool(2);
  TestMatrix low = MakeTestMatrix(MatrixFormat::kFp8, 70, 384, 32, rng);
  TestMatrix high = low;
  high.matrix.data = high.data.data();
  high.matrix.scale = high.scale.data();
  for (size_t i = 0; i < low.scale.size(); ++i) {
    high.scale[i] = static_cast<uint8_t>(135 + rng() % 8);
    low.scale[i] = static_cast<uint8_t>(high.scale[i] - 12);
  }
  std::vector<float> x = RandomVector(20 * 384, rng);
  for (Isa isa : SupportedIsas()) {
    if (isa == Isa::kGeneric) continue;
    for (int64_t n : {1, 2, 5, 12, 20}) {
      std::vector<float> y_low(n * 70), y_high(n * 70);
      MatMulWithIsa(isa, low.matrix, x.data(), n, 384, y_low.data(), 70, pool);
      MatMulWithIsa(isa, high.matrix, x.data(), n, 384, y_high.data(), 70, pool);
      for (auto& v : y_low) v = std::ldexp(v, 12);
      EXPECT_EQ(0, std::memcmp(y_low.data(), y_high.data(), y_low.size() * sizeof(float)))
          << IsaName(isa) << " n=" << n;
    }
  }
}

// With subnormal inputs treated as zero (MXCSR.DAZ), the decoder that makes e4m3 subnormals
// f32 subnormals must not be used: results stay those of a normal run.
TEST(MatMulTest, DenormalsAreZeroKeepsFp8Results) {
  std::mt19937 rng(37);
  base::ThreadPool pool(1);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 40, 256, 128, rng);
  for (size_t i = 0; i < tm.data.size(); i += 5) tm.data[i] &= 0x87;  // many e4m3 subnormals
  std::vector<float> x = RandomVector(3 * 256, rng);
  for (Isa isa : SupportedIsas()) {
    for (int64_t n : {1, 3}) {
      std::vector<float> normal(n * 40), daz(n * 40);
      MatMulWithIsa(isa, tm.matrix, x.data(), n, 256, normal.data(), 40, pool);
      const unsigned csr = _mm_getcsr();
      _mm_setcsr(csr | 0x40);
      MatMulWithIsa(isa, tm.matrix, x.data(), n, 256, daz.data(), 40, pool);
      _mm_setcsr(csr);
      EXPECT_EQ(0, std::memcmp(normal.data(), daz.data(), normal.size() * sizeof(float)))
          << IsaName(isa) << " n=" << n;
    }
  }
}

TEST(MatMulTest, ThreadCountNeverChangesBits) {
  std::mt19937 rng(17);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 1000, 512, 128, rng);
  std::vector<float> x = RandomVector(17 * 512, rng);
  for (int64_t n : {1, 9, 17}) {
    std::vector<float> first;
    for (int threads = 1; threads <= 4; ++threads) {
      base::ThreadPool pool(threads);
      std::vector<float> y(n * 1000);
      MatMul(tm.matrix, x.data(), n, 512, y.data(), 1000, pool);
      if (first.empty()) first = y;
      EXPECT_EQ(0, std::memcmp(first.data(), y.data(), y.size() * sizeof(float))) << threads << " threads";
    }
  }
}

TEST(MatMulTest, StridedInputsAndOutputs) {
  std::mt19937 rng(3);
  base::ThreadPool pool(2);
  for (MatrixFormat format : {MatrixFormat::kFp8, MatrixFormat::kFp4, MatrixFormat::kBF16}) {
    TestMatrix tm = MakeTestMatrix(format, 64, 128, 128, rng);
    for (int64_t n : {3, 9}) {
      const int64_t ldx = 200, ldy = 90;
      std::vector<float> x = RandomVector(n * ldx, rng);
      std::vector<float> ref(n * 64);
      MatMulReference(tm.matrix, x.data(), n, ldx, ref.data(), 64);
      for (Isa isa : SupportedIsas()) {
        std::vector<float> got(n * ldy, -7.0f);
        MatMulWithIsa(isa, tm.matrix, x.data(), n, ldx, got.data(), ldy, pool);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t o = 64; o < ldy; ++o) ASSERT_EQ(got[i * ldy + o], -7.0f);  // padding untouched
        ExpectClose(ref, got, n, 64, ldy, 2e-6, std::string("strided ") + IsaName(isa));
      }
    }
  }
}

// Activations as the QAT emulation leaves them before an FP4 product: exact BF16 values.
std::vector<float> Bf16Vector(int64_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::vector<float> x = RandomVector(n, rng, stddev);
  for (float& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
  return x;
}

// AVX512-BF16 products (FP4 in registers, FP8 panels for n >= 16) run only where they give the
// f32 paths' bits: on every shape and row count, alone or batched with a row that sends the
// call down the f32 path, with any thread count.
TEST(MatMulTest, Bf16PairPathsGiveTheF32PathsBits) {
  if (!IsaSupported(Isa::kAvx512) || !Avx512Bf16Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16 with AVX512-VBMI";
  SetBf16Dots(Bf16Dots::kOn);  // also where the CPU runs them slowly (the default would not use them)
  std::mt19937 rng(41);
  base::ThreadPool p1(1), p3(3);
  struct Case {
    MatrixFormat format;
    int64_t rows, cols;
    int tile;
  };
  const Case cases[] = {{MatrixFormat::kFp4, 37, 416, 32},  {MatrixFormat::kFp4, 5, 64, 32},
                        {MatrixFormat::kFp4, 100, 2048, 32}, {MatrixFormat::kFp4, 300, 1024, 32},
                        {MatrixFormat::kFp8, 37, 416, 32},  {MatrixFormat::kFp8, 140, 1024, 128},
                        {MatrixFormat::kFp8, 61, 200, 32},  {MatrixFormat::kFp8, 300, 512, 128},
                        {MatrixFormat::kFp8, 40, 256, 16},  {MatrixFormat::kBF16, 37, 416, 1},
                        {MatrixFormat::kBF16, 5, 64, 1},    {MatrixFormat::kBF16, 300, 1024, 1}};
  for (const Case& c : cases) {
    TestMatrix tm = MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng);
    const model::Matrix& w = tm.matrix;
    const int64_t max_n = 80, bad = 70, ldx = c.cols + 3;
    std::vector<float> x = Bf16Vector(max_n * ldx, rng);
    x[bad * ldx + 5] = 0.1f;  // not a BF16 value: calls holding this row take the f32 path
    const int64_t min_n = c.format == MatrixFormat::kFp8 ? 16 : 1;
    ASSERT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, w, x.data(), min_n, ldx)) << w.Describe();
    ASSERT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, w, x.data() + (bad - 19) * ldx, 20, ldx)) << w.Describe();
    for (int64_t n : {1, 2, 3, 5, 6, 7, 8, 9, 16, 17, 20, 33, 40, 65, 70}) {
      for (int64_t first : {int64_t{0}, bad + 1 - n}) {
        base::ThreadPool& pool = n % 2 == 0 ? p1 : p3;
        std::vector<float> bf16(n * c.rows), f32(n * c.rows);
        MatMulWithIsa(Isa::kAvx512, w, x.data() + first * ldx, n, ldx, bf16.data(), c.rows, pool);
        SetBf16Dots(Bf16Dots::kOff);
        MatMulWithIsa(Isa::kAvx512, w, x.data() + first * ldx, n, ldx, f32.data(), c.rows, pool);
        SetBf16Dots(Bf16Dots::kOn);
        ASSERT_EQ(0, std::memcmp(bf16.data(), f32.data(), bf16.size() * sizeof(float)))
            << w.Describe() << " n=" << n << " first=" << first << " threads=" << pool.num_threads();
      }
    }
  }
}

// FP4 repacked into the lane-pair layout (model::Fp4Layout) reads as the same elements and gives
// the checkpoint layout's bits on the AVX-512 paths (BF16 pairs and f32) and the portable one.
TEST(MatMulTest, Fp4LanePairLayoutGivesTheCheckpointLayoutsBits) {
  std::mt19937 rng(43);
  base::ThreadPool p1(1), p3(3);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{40, 416}, {8, 64}, {304, 1024}, {64, 32}}) {
    TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp4, rows, cols, 32, rng);
    const model::Matrix& w = tm.matrix;
    std::vector<uint8_t> packed(static_cast<size_t>(w.StoredBytes()));
    const model::Matrix lp = w.RepackFp4LanePairs(packed.data());
    ASSERT_NE(0, std::memcmp(packed.data(), w.data, static_cast<size_t>(rows * w.RowBytes())))
        << "a permutation, not a copy";
    if (cols > 32) {  // rows in groups: the scales too are reordered
      ASSERT_NE(0, std::memcmp(lp.scale, w.scale, static_cast<size_t>(w.NumScales())));
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(lp.Fp4Code(r, c), w.Fp4Code(r, c)) << r << "," << c;
        ASSERT_EQ(lp.At(r, c), w.At(r, c)) << r << "," << c;
      }
    // A slice from a group boundary reads the same rows (the products below also cover it).
    const model::Matrix tail = lp.RowSlice(8, rows), want_tail = w.RowSlice(8, rows);
    for (int64_t r = 0; r < tail.rows; ++r) ASSERT_EQ(tail.At(r, cols - 1), want_tail.At(r, cols - 1)) << r;
    const int64_t max_n = 40, ldx = cols + 3;
    std::vector<float> exact = Bf16Vector(max_n * ldx, rng), plain = RandomVector(max_n * ldx, rng);
    for (const std::vector<float>* x : {&exact, &plain}) {
      for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 17, 40}) {
        for (bool pairs : {false, true}) {
          if (pairs && (x != &exact || !IsaSupported(Isa::kAvx512) || !Avx512Bf16Supported())) continue;
          SetBf16Dots(pairs ? Bf16Dots::kOn : Bf16Dots::kOff);
          for (Isa isa : {Isa::kGeneric, Isa::kAvx512}) {
            if (!IsaSupported(isa)) continue;
            base::ThreadPool& pool = n % 2 == 0 ? p1 : p3;
            std::vector<float> want(n * rows, NAN), got(n * rows, NAN);
            MatMulWithIsa(isa, w, x->data(), n, ldx, want.data(), rows, pool);
            MatMulWithIsa(isa, lp, x->data(), n, ldx, got.data(), rows, pool);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                << lp.Describe() << " " << IsaName(isa) << " n=" << n << " bf16 pairs " << pairs
                << " uses pairs " << internal::UsesBf16Pairs(isa, lp, x->data(), n, ldx);
          }
          SetBf16Dots(Bf16Dots::kOn);
        }
      }
    }
  }
}

// The lane-pair layout is refused where it cannot be read: by the AVX2 kernels (the dispatcher
// aborts naming the matrix) and by the repacking of anything but a checkpoint-order FP4 matrix
// with a multiple of 32 columns.
TEST(MatMulDeathTest, Fp4LanePairsOnlyWhereSupported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::mt19937 rng(44);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp4, 8, 64, 32, rng);
  std::vector<uint8_t> packed(static_cast<size_t>(tm.matrix.StoredBytes()));
  const model::Matrix lp = tm.matrix.RepackFp4LanePairs(packed.data());
  if (IsaSupported(Isa::kAvx2)) {
    std::vector<float> x(64, 1.0f), y(8);
    base::ThreadPool pool(1);
    EXPECT_DEATH(MatMulWithIsa(Isa::kAvx2, lp, x.data(), 1, 64, y.data(), 8, pool), "lane-pair layout.*avx2");
  }
  std::vector<uint8_t> out(packed.size());
  EXPECT_DEATH((void)lp.RepackFp4LanePairs(out.data()), "checkpoint order");
  TestMatrix fp8 = MakeTestMatrix(MatrixFormat::kFp8, 8, 64, 32, rng);
  EXPECT_DEATH((void)fp8.matrix.RepackFp4LanePairs(out.data()), "lane-pair repacking");
  TestMatrix narrow = MakeTestMatrix(MatrixFormat::kFp4, 8, 48, 32, rng);
  EXPECT_DEATH((void)narrow.matrix.RepackFp4LanePairs(out.data()), "cols % 32");
  TestMatrix ragged = MakeTestMatrix(MatrixFormat::kFp4, 12, 64, 32, rng);
  std::vector<uint8_t> big(static_cast<size_t>(ragged.matrix.StoredBytes()));
  EXPECT_DEATH((void)ragged.matrix.RepackFp4LanePairs(big.data()), "rows % 8");
  EXPECT_DEATH((void)lp.RowSlice(4, 8), "not aligned to their 8-row groups");
}

// FP8 NaN codes (absent from checkpoints) read as +-480 times the scale on every vector path,
// the BF16 pairs (in registers for 5-8 rows, panels from 16) included.
TEST(MatMulTest, Bf16PairPathsReadFp8NanCodesAsTheF32PathsDo) {
  if (!IsaSupported(Isa::kAvx512) || !Avx512Bf16Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16 with AVX512-VBMI";
  SetBf16Dots(Bf16Dots::kOn);  // also where the CPU runs them slowly (the default would not use them)
  std::mt19937 rng(47);
  base::ThreadPool pool(2);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 48, 256, 128, rng);
  tm.matrix.data = tm.data.data();
  for (size_t i = 0; i < tm.data.size(); i += 7) tm.data[i] = i % 2 == 0 ? 0x7F : 0xFF;
  std::vector<float> x = Bf16Vector(16 * 256, rng);
  for (int64_t n : {8, 16}) {
    ASSERT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, tm.matrix, x.data(), n, 256)) << n;
    std::vector<float> bf16(n * 48), f32(n * 48);
    MatMulWithIsa(Isa::kAvx512, tm.matrix, x.data(), n, 256, bf16.data(), 48, pool);
    SetBf16Dots(Bf16Dots::kOff);
    MatMulWithIsa(Isa::kAvx512, tm.matrix, x.data(), n, 256, f32.data(), 48, pool);
    SetBf16Dots(Bf16Dots::kOn);
    EXPECT_EQ(0, std::memcmp(bf16.data(), f32.data(), bf16.size() * sizeof(float))) << "n=" << n;
  }
}

TEST(MatMulTest, Bf16PairPathsOnlyWhereExact) {
  if (!IsaSupported(Isa::kAvx512) || !Avx512Bf16Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16 with AVX512-VBMI";
  SetBf16Dots(Bf16Dots::kOn);  // also where the CPU runs them slowly (the default would not use them)
  std::mt19937 rng(43);
  base::ThreadPool pool(2);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp4, 24, 256, 32, rng);
  const model::Matrix& w = tm.matrix;
  std::vector<float> x = Bf16Vector(3 * 256, rng);
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, w, x.data(), 3, 256));
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, w, x.data(), 1, 256));  // FP4: from one row
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx2, w, x.data(), 3, 256));
  std::vector<float> zeros(3 * 256, 0.0f);
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, w, zeros.data(), 3, 256));
  // FP8: panels (n >= 16) of vector-decodable tiles, or in registers for one pass of wide tiles
  // (5-8 rows) where the columns come in whole groups of 32.
  std::vector<float> rows16 = Bf16Vector(16 * 256, rng);
  TestMatrix fp8 = MakeTestMatrix(MatrixFormat::kFp8, 24, 256, 128, rng);
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 16, 256));
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 15, 256));
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 9, 256));
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 8, 256));
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 5, 256));
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 4, 256));
  TestMatrix fp8_200 = MakeTestMatrix(MatrixFormat::kFp8, 24, 200, 32, rng);
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, fp8_200.matrix, rows16.data(), 8, 200));
  TestMatrix fp8_48 = MakeTestMatrix(MatrixFormat::kFp8, 24, 256, 48, rng);
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, fp8_48.matrix, rows16.data(), 16, 256));
  rows16[100] = 0x1p-110f;  // e4m3 subnormal steps times 2^-9 scales make products finer than 2^-126
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 16, 256));
  rows16[100] = 0x1p-100f;  // fine again
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, fp8.matrix, rows16.data(), 16, 256));
  // Each of these sends the call to the f32 path; the results stay those of the f32 path.
  const auto check_fallback = [&](std::vector<float> v, const model::Matrix& m, const char* what) {
    EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, m, v.data(), 3, 256)) << what;
    std::vector<float> got(3 * 24), ref(3 * 24);
    MatMulWithIsa(Isa::kAvx512, m, v.data(), 3, 256, got.data(), 24, pool);
    SetBf16Dots(Bf16Dots::kOff);
    MatMulWithIsa(Isa::kAvx512, m, v.data(), 3, 256, ref.data(), 24, pool);
    SetBf16Dots(Bf16Dots::kOn);
    EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), sizeof(float) * got.size())) << what;
  };
  std::vector<float> v = x;
  v[9] = std::numeric_limits<float>::infinity();
  check_fallback(v, w, "infinity");
  v = x;
  v[9] = 0x1p-127f;  // a subnormal activation
  check_fallback(v, w, "subnormal");
  v = x;
  v[9] = 0x1p-115f;  // with scale bytes from 118 (2^-9), products finer than 2^-126
  check_fallback(v, w, "fine products");
  TestMatrix tiny_scale = tm;
  tiny_scale.matrix.data = tiny_scale.data.data();
  tiny_scale.matrix.scale = tiny_scale.scale.data();
  tiny_scale.scale[3] = 1;  // 0.5 * 2^-126 is not a normal BF16
  check_fallback(x, tiny_scale.matrix, "scale byte 1");
  const unsigned csr = _mm_getcsr();
  _mm_setcsr((csr & ~0x6000u) | 0x6000u);  // round toward zero: the instruction would not
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, w, x.data(), 3, 256));
  _mm_setcsr(csr);
  // BF16 weights: from one row, where the columns come in whole groups of 32 and the weights'
  // exponent range is known, normal and finite, and no product is finer than 2^-126.
  TestMatrix bf16 = MakeTestMatrix(MatrixFormat::kBF16, 24, 256, 1, rng);
  EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, bf16.matrix, x.data(), 1, 256));
  model::Matrix unknown = bf16.matrix;
  unknown.exp_lo = unknown.exp_hi = -1;
  check_fallback(x, unknown, "BF16 exponent range not known");
  TestMatrix bf16_200 = MakeTestMatrix(MatrixFormat::kBF16, 24, 200, 1, rng);
  EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, bf16_200.matrix, x.data(), 3, 200));
  TestMatrix subnormal = bf16;
  subnormal.matrix.data = subnormal.data.data();
  reinterpret_cast<uint16_t*>(subnormal.data.data())[7] = 0x0001;  // the least BF16 subnormal
  subnormal.matrix.SetExponentRange();
  EXPECT_EQ(subnormal.matrix.exp_lo, 0);
  check_fallback(x, subnormal.matrix, "a subnormal BF16 weight");
  v = x;
  v[9] = 0x1p-100f;  // times weights from about 2^-30: products finer than 2^-126
  TestMatrix small = bf16;
  small.matrix.data = small.data.data();
  reinterpret_cast<uint16_t*>(small.data.data())[7] = model::FloatToBf16(0x1p-30f);
  small.matrix.SetExponentRange();
  check_fallback(v, small.matrix, "fine BF16 products");
}

// The activation check that sends rows to the BF16-pair and AMX paths, against a scalar
// statement of it: the exponent field of the least nonzero |x| (255: all zero), or -1 unless
// every value is a finite, exact BF16, zero or normal. Rows with one odd value at positions spread
// over them (the two-vector loop and the masked tail), one and three rows, both signs.
TEST(MatMulTest, Bf16ActivationFieldMatchesItsDefinition) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 here";
  const auto reference = [](const std::vector<float>& x, int64_t n, int64_t ldx, int64_t cols) {
    uint32_t least = 0xFFFFFFFFu;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < cols; ++c) {
        const uint32_t u = std::bit_cast<uint32_t>(x[i * ldx + c]) & 0x7FFFFFFFu;
        if ((u & 0xFFFFu) != 0 || u >= 0x7F800000u) return -1;
        if (u != 0) least = std::min(least, u);
      }
    if (least == 0xFFFFFFFFu) return 255;
    return least >> 23 >= 1 ? static_cast<int>(least >> 23) : -1;
  };
  std::mt19937 rng(41);
  const uint32_t odd[] = {0x3F800001u, 0x7F800000u, 0xFFC00000u, 0x00010000u, 0x80800000u, 0x00800000u, 0x80000000u,
                          0x0u, 0x7F7F0000u};
  int checked = 0;
  for (int64_t cols : {1, 15, 16, 17, 31, 32, 33, 48, 95, 1024})
    for (int64_t n : {1, 3}) {
      const int64_t ldx = cols + 2;
      for (uint32_t value : odd)
        for (int64_t at = 0; at < n * cols; at += std::max<int64_t>(1, cols / 5)) {
          std::vector<float> x = RandomVector(n * ldx, rng);
          for (float& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
          x[at / cols * ldx + at % cols] = std::bit_cast<float>(value);
          ASSERT_EQ(reference(x, n, ldx, cols), internal::Bf16ActivationFieldAvx512(x.data(), n, ldx, cols))
              << "cols " << cols << " n " << n << " value " << std::hex << value << std::dec << " at " << at;
          ++checked;
        }
      std::vector<float> zeros(n * ldx, 0.0f);
      EXPECT_EQ(255, internal::Bf16ActivationFieldAvx512(zeros.data(), n, ldx, cols));
    }
  EXPECT_GT(checked, 1000);
}

// kAuto follows the measured rate (once per process, so every call agrees); kOn and kOff
// override it, kOn only where the CPU has the instruction.
TEST(MatMulTest, Bf16DotsFollowTheMeasuredRateUnlessForced) {
  const bool has = IsaSupported(Isa::kAvx512) && Avx512Bf16Supported();
  const double rate = Bf16DotRateVsFma();
  EXPECT_EQ(rate, Bf16DotRateVsFma());
  if (has) {
    EXPECT_GT(rate, 0.05);  // well below the lowest rate measured (Emerald Rapids; docs/benchmarks.md)
    EXPECT_LT(rate, 8.0);
  } else {
    EXPECT_EQ(rate, 0.0);
  }
  SetBf16Dots(Bf16Dots::kAuto);
  EXPECT_EQ(Bf16PairsAvailable(), has && rate >= 0.4) << "rate " << rate;
  SetBf16Dots(Bf16Dots::kOn);
  EXPECT_EQ(Bf16PairsAvailable(), has);
  SetBf16Dots(Bf16Dots::kOff);
  EXPECT_FALSE(Bf16PairsAvailable());
  if (has) {
    std::mt19937 rng(7);
    const TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp4, 64, 256, 32, rng);
    std::vector<float> x(256, 0.5f);  // exact BF16
    EXPECT_FALSE(internal::UsesBf16Pairs(Isa::kAvx512, tm.matrix, x.data(), 1, 256));
    SetBf16Dots(Bf16Dots::kOn);
    EXPECT_TRUE(internal::UsesBf16Pairs(Isa::kAvx512, tm.matrix, x.data(), 1, 256));
  }
  SetBf16Dots(Bf16Dots::kAuto);
}

// The probe runs with MXCSR's flush bits cleared (else it would time flushed operands) and
// puts them back; its answer is fixed for the process.
TEST(MatMulTest, SubnormalProbeRestoresMxcsr) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ on
  const bool slow = SubnormalOperandsAreSlow();
  EXPECT_EQ(_mm_getcsr(), csr | 0x8040u);
  _mm_setcsr(csr);
  EXPECT_EQ(slow, SubnormalOperandsAreSlow());
}

TEST(MatMulTest, ReportsTheBestIsa) {
  EXPECT_STREQ(MatMulIsa(), IsaName(BestIsa()));
  EXPECT_TRUE(IsaSupported(BestIsa()));
  EXPECT_TRUE(IsaSupported(Isa::kGeneric));
  if (IsaSupported(Isa::kAvx512)) {
    EXPECT_TRUE(IsaSupported(Isa::kAvx2));
  }
}

// Every product checks its ISA, so the check must answer from memory: CPUID traps to the
// hypervisor in a virtual machine (microseconds a call). A million checks take about 2 ms of
// CPU from memory; a CPUID each takes 25 ms or more even on bare metal. CPU time, so that a
// busy machine cannot fail it.
TEST(MatMulTest, IsaChecksAnswerFromMemory) {
  const auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  const double begin = cpu_seconds();
  int supported = 0;
  for (int i = 0; i < 1'000'000; ++i) supported += IsaSupported(i % 2 == 0 ? Isa::kAvx512 : Isa::kAvx2) ? 1 : 0;
  const double seconds = cpu_seconds() - begin;
  EXPECT_LT(seconds, 0.02) << supported << " of a million checks true";
}

}  // namespace
}  // namespace flashserve::kernels
