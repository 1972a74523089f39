// Ops::LinearPair (an expert's w1 and w3 from one FP8 rounding of the input) against two Linear
// calls, bit for bit, with QAT on and off, for FP8 and FP4 weights and a strided input; products
// of an input rounded beforehand against Linear; the per-phase work counters of profiling.
#include "engine/ops.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/test_matrices.h"

namespace flashserve::engine {
namespace {

TEST(OpsTest, LinearPairEqualsTwoLinearCalls) {
  base::ThreadPool pool(2);
  std::mt19937 rng(5);
  for (bool qat : {true, false}) {
    EngineOptions options;
    options.qat = qat;
    Ops ops(pool, options);
    for (model::MatrixFormat format : {model::MatrixFormat::kFp8, model::MatrixFormat::kFp4}) {
      const int tile = format == model::MatrixFormat::kFp8 ? 128 : 32;
      kernels::TestMatrix a = kernels::MakeTestMatrix(format, 96, 256, tile, rng);
      kernels::TestMatrix b = kernels::MakeTestMatrix(format, 80, 256, tile, rng);
      for (int64_t n : {1, 3, 8}) {
        const int64_t ldx = 260;
        const std::vector<float> x = kernels::RandomVector(n * ldx, rng, 3.0f);
        const int64_t ldy = 96;
        std::vector<float> ya(n * ldy), yb(n * ldy), ra(n * ldy), rb(n * ldy);
        ops.LinearPair(a.matrix, b.matrix, x.data(), n, ldx, ya.data(), yb.data(), ldy);
        ops.Linear(a.matrix, x.data(), n, ldx, ra.data(), ldy);
        ops.Linear(b.matrix, x.data(), n, ldx, rb.data(), ldy);
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(0, std::memcmp(ya.data() + i * ldy, ra.data() + i * ldy, sizeof(float) * 96)) << n << " " << qat;
          EXPECT_EQ(0, std::memcmp(yb.data() + i * ldy, rb.data() + i * ldy, sizeof(float) * 80)) << n << " " << qat;
        }
      }
    }
  }
}

// An input rounded once (RoundToFp8, or RoundRowsToFp8 in place) and then multiplied without
// rounding again (LinearOfRounded, LinearPairOfRounded, as the MoE does for all the experts of a
// row) gives Linear's bits; the rounding itself changes the input (so the test could fail).
TEST(OpsTest, ProductsOfARoundedInputEqualLinear) {
  base::ThreadPool pool(2);
  std::mt19937 rng(7);
  EngineOptions options;
  Ops ops(pool, options);
  for (model::MatrixFormat format : {model::MatrixFormat::kFp8, model::MatrixFormat::kFp4}) {
    const int tile = format == model::MatrixFormat::kFp8 ? 128 : 32;
    kernels::TestMatrix a = kernels::MakeTestMatrix(format, 96, 256, tile, rng);
    kernels::TestMatrix b = kernels::MakeTestMatrix(format, 80, 256, tile, rng);
    ASSERT_TRUE(ops.RoundsInput(a.matrix) && ops.RoundsInput(b.matrix));
    for (int64_t n : {1, 3, 17}) {
      const int64_t ldx = 260, ldy = 96;
      std::vector<float> x = kernels::RandomVector(n * ldx, rng, 3.0f);
      for (int64_t i = 0; i < n * ldx; ++i)  // the two halves of each 128 channels in different binades
        if ((i % ldx) % 128 >= 64) x[i] *= 1.0f / 64;
      base::AlignedVector<float> buffer;
      std::vector<float> in_place = x;
      const float* q = ops.RoundToFp8(x.data(), n, ldx, 256, buffer);
      ops.RoundRowsToFp8(in_place.data(), n, ldx, 256);
      int changed = 0;
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(0, std::memcmp(q + i * 256, in_place.data() + i * ldx, sizeof(float) * 256)) << n;
        changed += std::memcmp(q + i * 256, x.data() + i * ldx, sizeof(float) * 256) != 0;
      }
      EXPECT_EQ(changed, n) << "FP8 rounding left a row unchanged";
      std::vector<float> ya(n * ldy), yb(n * ldy), ra(n * ldy), rb(n * ldy), y1(n * ldy);
      ops.LinearPairOfRounded(a.matrix, b.matrix, q, n, 256, ya.data(), yb.data(), ldy);
      ops.LinearOfRounded(a.matrix, in_place.data(), n, ldx, y1.data(), ldy);
      ops.Linear(a.matrix, x.data(), n, ldx, ra.data(), ldy);
      ops.Linear(b.matrix, x.data(), n, ldx, rb.data(), ldy);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(0, std::memcmp(ya.data() + i * ldy, ra.data() + i * ldy, sizeof(float) * 96)) << n;
        EXPECT_EQ(0, std::memcmp(y1.data() + i * ldy, ra.data() + i * ldy, sizeof(float) * 96)) << n;
        EXPECT_EQ(0, std::memcmp(yb.data() + i * ldy, rb.data() + i * ldy, sizeof(float) * 80)) << n;
      }
    }
  }
}

// With profiling on, work is filed under the phase whose scope it ran in, whichever thread did
// it; work outside every phase goes to the last slot.
TEST(OpsTest, ProfilingFilesWorkUnderItsPhase) {
  base::ThreadPool pool(2);
  std::mt19937 rng(9);
  EngineOptions options;
  options.profile = true;
  Ops ops(pool, options);
  kernels::TestMatrix w = kernels::MakeTestMatrix(model::MatrixFormat::kFp8, 64, 256, 128, rng);
  const std::vector<float> x = kernels::RandomVector(4 * 256, rng);
  std::vector<float> y(4 * 64);
  {
    Ops::ScopedPhase phase(ops, Phase::kQuery);
    ops.Linear(w.matrix, x.data(), 4, 256, y.data(), 64);
    ops.ForTasks(3, [&](int64_t) { ops.CountWork(10.0, 100.0); });  // on pool threads
  }
  ops.Linear(w.matrix, x.data(), 1, 256, y.data(), 64);
  const OpStats s = ops.stats();
  const double bytes = static_cast<double>(w.matrix.StoredBytes());
  EXPECT_DOUBLE_EQ(s.phase_flops[static_cast<size_t>(Phase::kQuery)], 2.0 * 4 * 64 * 256 + 30.0);
  EXPECT_DOUBLE_EQ(s.phase_bytes[static_cast<size_t>(Phase::kQuery)], bytes + 300.0);
  EXPECT_DOUBLE_EQ(s.phase_flops[OpStats::kPhases], 2.0 * 64 * 256);
  EXPECT_DOUBLE_EQ(s.phase_bytes[OpStats::kPhases], bytes);
  EXPECT_DOUBLE_EQ(s.flops, 2.0 * 5 * 64 * 256 + 30.0);
  ops.ResetStats();
  EXPECT_EQ(ops.stats().phase_flops[static_cast<size_t>(Phase::kQuery)], 0.0);
}

}  // namespace
}  // namespace flashserve::engine
