// The CUDA matrix product against the CPU's AVX-512 order, bit for bit: the scalar emulation
// of the documented order (test_matrices.h) on every host, and MatMulWithIsa(kAvx512) itself
// where this CPU has AVX-512. Skips, saying so, where no CUDA device is usable.
#include "kernels/cuda/cuda_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "kernels/cuda/exact_matmul_kernels.h"
#include "kernels/cuda/lane_major.h"
#include "kernels/gemm/matmul.h"
#include "kernels/gemm/matmul_internal.h"
#include "kernels/simd/isa.h"
#include "kernels/test_matrices.h"

namespace flashserve::kernels::cuda {
namespace {

using model::MatrixFormat;

class CudaMatMulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto device = DeviceDescription();
    if (!device.ok()) GTEST_SKIP() << "no CUDA device here (" << device.error().ToString() << ")";
  }
};

// The lane-major layout, rebuilt here from its description (lane_major.h) column by column, is
// what PackRowLaneMajor writes. Host only: runs without a GPU.
TEST(CudaLayoutTest, PackedRowsPutEveryColumnWhereTheLaneReadsIt) {
  std::mt19937 rng(59);
  struct Shape {
    MatrixFormat format;
    int64_t cols;
    int elem;  // bytes per column (FP4: per column pair)
    int blocks_per_group;
  };
  const Shape shapes[] = {{MatrixFormat::kF32, 203, 4, 4},   {MatrixFormat::kBF16, 203, 2, 8},
                          {MatrixFormat::kF16, 40, 2, 8},    {MatrixFormat::kFp8, 200, 1, 16},
                          {MatrixFormat::kFp8, 4096, 1, 16}, {MatrixFormat::kFp4, 544, 1, 16}};
  for (const Shape& sh : shapes) {
    TestMatrix tm = MakeTestMatrix(sh.format, 3, sh.cols, sh.format == MatrixFormat::kFp8 ? 128 : 32, rng);
    const auto f = static_cast<internal::Format>(sh.format);
    const int64_t groups = internal::GroupsPerRow(f, sh.cols), bytes = groups * internal::kGroupBytes;
    const bool fp4 = sh.format == MatrixFormat::kFp4;
    const int64_t units = fp4 ? sh.cols / 2 : sh.cols;  // FP4: one unit = one byte = two columns
    for (int64_t r = 0; r < 3; ++r) {
      std::vector<uint8_t> want(static_cast<size_t>(bytes), 0), got(static_cast<size_t>(bytes), 0xAB);
      const uint8_t* row = tm.matrix.data + r * tm.matrix.RowBytes();
      for (int64_t u = 0; u < units; ++u) {
        const int64_t block = u / 16, lane = u % 16;
        const int64_t g = block / sh.blocks_per_group, k = block % sh.blocks_per_group;
        std::memcpy(want.data() + g * 256 + lane * 16 + k * sh.elem, row + u * sh.elem, sh.elem);
      }
      internal::PackRowLaneMajor(tm.matrix, r, got.data());
      ASSERT_EQ(want, got) << tm.matrix.Describe() << " row " << r;
    }
    EXPECT_EQ(internal::PackedXPerLane(f), sh.blocks_per_group * (fp4 ? 2 : 1)) << tm.matrix.Describe();
  }
}

// Argument checks that answer before any device work, so they hold without a GPU too.
TEST(CudaArgumentsTest, RejectedBeforeAnyDeviceWork) {
  EXPECT_EQ(DeviceFloats::Allocate(-1).error().code(), base::ErrorCode::kInvalidArgument);
  float v = 0;
  EXPECT_EQ(DeviceFloats().CopyFromHost(&v, 1).error().code(), base::ErrorCode::kOutOfRange);
  EXPECT_EQ(DeviceFloats().CopyToHost(&v, 1).error().code(), base::ErrorCode::kOutOfRange);

  EXPECT_EQ(DeviceMatrix::Upload(model::Matrix{}).error().code(), base::ErrorCode::kInvalidArgument);
  std::mt19937 rng(61);
  TestMatrix fp8 = MakeTestMatrix(MatrixFormat::kFp8, 48, 96, 48, rng);
  EXPECT_EQ(DeviceMatrix::Upload(fp8.matrix).error().code(), base::ErrorCode::kUnimplemented);
  TestMatrix fp4 = MakeTestMatrix(MatrixFormat::kFp4, 4, 64, 32, rng);
  fp4.matrix.tile_cols = 16;  // one scale per 16 columns: not the checkpoint format
  auto odd = DeviceMatrix::Upload(fp4.matrix);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().code(), base::ErrorCode::kUnimplemented);
  EXPECT_NE(odd.error().message().find("FP4"), std::string::npos) << odd.error().message();

  ExactMatMul mm;
  const base::Status s = mm.Run(DeviceMatrix(), &v, 1, 64, &v, 8);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), base::ErrorCode::kInvalidArgument);
}

// y = W x on the device for n rows of x (row stride cols + 3; y row stride rows + 1).
std::vector<float> RunOnDevice(const DeviceMatrix& w, const std::vector<float>& x, int64_t n, int64_t ldx,
                               int64_t ldy, int rows_per_thread = 0) {
  auto dx = DeviceFloats::Allocate(static_cast<int64_t>(x.size()));
  auto dy = DeviceFloats::Allocate(n * ldy);
  EXPECT_TRUE(dx.ok() && dy.ok());
  EXPECT_TRUE(dx->CopyFromHost(x.data(), static_cast<int64_t>(x.size())).ok());
  std::vector<float> y(n * ldy, -7.0f);
  EXPECT_TRUE(dy->CopyFromHost(y.data(), n * ldy).ok());
  ExactMatMul mm;
  base::Status s = mm.Run(w, dx->data(), n, ldx, dy->data(), ldy, rows_per_thread);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = mm.Synchronize();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(dy->CopyToHost(y.data(), n * ldy).ok());
  return y;
}

struct Case {
  MatrixFormat format;
  int64_t rows, cols;
  int tile;
};

TEST_F(CudaMatMulTest, GivesTheAvx512OrdersBitsForEveryFormatAndShape) {
  const Case cases[] = {
      {MatrixFormat::kF32, 13, 203, 1},    {MatrixFormat::kBF16, 13, 203, 1},   {MatrixFormat::kF16, 7, 40, 1},
      {MatrixFormat::kFp8, 300, 200, 128}, {MatrixFormat::kFp8, 45, 200, 32},   {MatrixFormat::kFp8, 33, 96, 16},
      {MatrixFormat::kFp4, 13, 192, 32},   {MatrixFormat::kFp4, 70, 544, 32},   {MatrixFormat::kFp8, 260, 1056, 128},
      {MatrixFormat::kBF16, 40, 4096, 1},  {MatrixFormat::kFp4, 257, 4096, 32},
  };
  const bool have_avx512 = IsaSupported(Isa::kAvx512);
  base::ThreadPool pool(2);
  std::mt19937 rng(41);
  for (const Case& c : cases) {
    TestMatrix tm = MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng);
    auto w = DeviceMatrix::Upload(tm.matrix);
    ASSERT_TRUE(w.ok()) << w.error().ToString();
    std::vector<float> dequant(c.rows * c.cols);
    DequantizeRows(tm.matrix, 0, c.rows, dequant.data());
    const int64_t ldx = c.cols + 3, ldy = c.rows + 1;
    for (int64_t n : {1, 2, 3, 5, 8, 9, 17}) {
      std::vector<float> x = RandomVector(n * ldx, rng);
      const std::vector<float> y = RunOnDevice(*w, x, n, ldx, ldy);
      std::vector<float> cpu(n * ldy);
      if (have_avx512) kernels::internal::MatMulWithIsa(Isa::kAvx512, tm.matrix, x.data(), n, ldx, cpu.data(), ldy, pool);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t o = 0; o < c.rows; ++o) {
          const float want = DocumentedOrderDot(dequant.data() + o * c.cols, x.data() + i * ldx, c.cols, 16, false,
                                                c.format == MatrixFormat::kFp4);
          const float got = y[i * ldy + o];
          ASSERT_EQ(0, std::memcmp(&want, &got, sizeof got))
              << tm.matrix.Describe() << " n=" << n << " (" << i << ", " << o << "): " << got << " vs " << want;
          if (have_avx512) {
            ASSERT_EQ(0, std::memcmp(&cpu[i * ldy + o], &got, sizeof got)) << tm.matrix.Describe();
          }
        }
      for (int64_t i = 0; i < n; ++i)  // the padding of each output row is left alone
        ASSERT_EQ(y[i * ldy + c.rows], -7.0f);
    }
  }
}

// Equal bits, or both NaN (NaN payloads may differ between the CPU and the GPU).
bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

// Scale bytes and codes at the edges of the kernels' fast decoders: the GPU must read them as
// the AVX-512 CPU path does (FP8 NaN codes as +-480 where the CPU's vector decoder runs, NaN
// where a scale byte above 246 sends it to the scalar one; FP4 and FP8 scale bytes 0, above
// the fast ranges, and 255).
TEST_F(CudaMatMulTest, ReadsScaleAndCodeEdgesAsTheAvx512PathDoes) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "needs an AVX-512 CPU to compare with";
  base::ThreadPool pool(2);
  std::mt19937 rng(53);
  struct Edge {
    const char* what;
    TestMatrix tm;
  };
  std::vector<Edge> edges;
  {
    TestMatrix t = MakeTestMatrix(MatrixFormat::kFp4, 24, 320, 32, rng);
    for (auto& b : t.scale) b = static_cast<uint8_t>(118 + b % 11);  // 118..128: the fast decoder
    edges.push_back({"FP4 scales <= 128", std::move(t)});
  }
  {
    TestMatrix t = MakeTestMatrix(MatrixFormat::kFp4, 24, 320, 32, rng);
    t.scale[3] = 0, t.scale[17] = 200, t.scale[40] = 255, t.scale[41] = 129;
    edges.push_back({"FP4 scales 0, 129, 200, 255", std::move(t)});
  }
  {
    TestMatrix t = MakeTestMatrix(MatrixFormat::kFp8, 256, 384, 128, rng);
    t.data[5] = 0x7F, t.data[384 * 7 + 100] = 0xFF, t.data[384 * 200 + 383] = 0x7F;
    edges.push_back({"FP8 NaN codes, scales <= 246", std::move(t)});
  }
  {
    TestMatrix t = MakeTestMatrix(MatrixFormat::kFp8, 64, 256, 32, rng);
    t.scale[2] = 0;
    t.data[70] = 0x7F;
    edges.push_back({"FP8 scale 0 and a NaN code", std::move(t)});
  }
  {
    TestMatrix t = MakeTestMatrix(MatrixFormat::kFp8, 64, 256, 32, rng);
    t.scale[3] = 250;  // tile (0, 3): codes kept small so that values stay finite
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 96; c < 128; ++c) t.data[r * 256 + c] &= 0x87;
    t.data[256 * 40 + 7] = 0xFF;
    edges.push_back({"FP8 scale 250 and a NaN code", std::move(t)});
  }
  for (Edge& e : edges) {
    auto w = DeviceMatrix::Upload(e.tm.matrix);
    ASSERT_TRUE(w.ok()) << w.error().ToString();
    const int64_t rows = e.tm.matrix.rows, cols = e.tm.matrix.cols;
    for (int64_t n : {1, 3, 8}) {
      std::vector<float> x = RandomVector(n * cols, rng);
      const std::vector<float> y = RunOnDevice(*w, x, n, cols, rows);
      std::vector<float> cpu(n * rows);
      kernels::internal::MatMulWithIsa(Isa::kAvx512, e.tm.matrix, x.data(), n, cols, cpu.data(), rows, pool);
      int nans = 0;
      for (int64_t k = 0; k < n * rows; ++k) {
        ASSERT_TRUE(SameFloat(cpu[k], y[k])) << e.what << " n=" << n << " at " << k << ": " << y[k] << " vs " << cpu[k];
        nans += std::isnan(y[k]);
      }
      if (std::string(e.what).find("250") != std::string::npos) {
        EXPECT_GT(nans, 0) << e.what;
      }
    }
  }
}

TEST_F(CudaMatMulTest, RowsPerThreadNeverChangesBits) {
  std::mt19937 rng(43);
  TestMatrix tm = MakeTestMatrix(MatrixFormat::kFp8, 128, 1024, 128, rng);
  auto w = DeviceMatrix::Upload(tm.matrix);
  ASSERT_TRUE(w.ok());
  const int64_t n = 11, ld = 1024;
  std::vector<float> x = RandomVector(n * ld, rng);
  const std::vector<float> one = RunOnDevice(*w, x, n, ld, 128, 1);
  for (int ni : {2, 4, 8}) {
    const std::vector<float> y = RunOnDevice(*w, x, n, ld, 128, ni);
    ASSERT_EQ(0, std::memcmp(one.data(), y.data(), y.size() * sizeof(float))) << ni << " rows per thread";
  }
  // And a row alone gives the bits it gets in the batch.
  for (int64_t i : {0, 5, 10}) {
    std::vector<float> xi(x.begin() + i * ld, x.begin() + (i + 1) * ld);
    const std::vector<float> alone = RunOnDevice(*w, xi, 1, ld, 128);
    ASSERT_EQ(0, std::memcmp(alone.data(), one.data() + i * 128, 128 * sizeof(float))) << "row " << i;
  }
}

TEST_F(CudaMatMulTest, RejectsWhatItDoesNotTake) {
  std::mt19937 rng(47);
  TestMatrix odd = MakeTestMatrix(MatrixFormat::kFp8, 48, 96, 48, rng);
  auto w = DeviceMatrix::Upload(odd.matrix);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code(), base::ErrorCode::kUnimplemented);
  EXPECT_NE(w.error().message().find("power of two"), std::string::npos) << w.error().message();

  TestMatrix fp4 = MakeTestMatrix(MatrixFormat::kFp4, 8, 64, 32, rng);  // repacked for AVX-512
  std::vector<uint8_t> packed(static_cast<size_t>(fp4.matrix.StoredBytes()));
  auto lane_pairs = DeviceMatrix::Upload(fp4.matrix.RepackFp4LanePairs(packed.data()));
  ASSERT_FALSE(lane_pairs.ok());
  EXPECT_EQ(lane_pairs.error().code(), base::ErrorCode::kUnimplemented);
  EXPECT_NE(lane_pairs.error().message().find("checkpoint order"), std::string::npos) << lane_pairs.error().message();

  TestMatrix ok = MakeTestMatrix(MatrixFormat::kBF16, 8, 64, 1, rng);
  auto m = DeviceMatrix::Upload(ok.matrix);
  ASSERT_TRUE(m.ok());
  auto buf = DeviceFloats::Allocate(1024);
  ASSERT_TRUE(buf.ok());
  ExactMatMul mm;
  EXPECT_FALSE(mm.Run(*m, buf->data(), 2, 32, buf->data() + 512, 8).ok());   // ldx < cols
  EXPECT_FALSE(mm.Run(*m, buf->data(), 2, 64, buf->data() + 512, 4).ok());   // ldy < rows
  EXPECT_FALSE(mm.Run(*m, nullptr, 2, 64, buf->data() + 512, 8).ok());
  EXPECT_FALSE(mm.Run(*m, buf->data(), 2, 64, buf->data() + 512, 8, 3).ok());  // 3 rows per thread
  EXPECT_FALSE(mm.Run(DeviceMatrix(), buf->data(), 2, 64, buf->data() + 512, 8).ok());
  EXPECT_FALSE(mm.Run(*m, buf->data(), 65536, 64, buf->data() + 512, 8, 1).ok());  // more row groups than a grid takes
  EXPECT_TRUE(mm.Run(*m, buf->data(), 0, 64, buf->data() + 512, 8).ok());  // nothing to do
  EXPECT_TRUE(mm.Synchronize().ok());
}

}  // namespace
}  // namespace flashserve::kernels::cuda
