#include "kernels/roofline.h"

#include <gtest/gtest.h>

#include <cmath>

namespace flashserve::kernels {
namespace {

TEST(RooflineTest, BandwidthIsAPlausibleRate) {
  base::ThreadPool pool(2);
  const double gbs = MeasureMemoryBandwidth(pool, int64_t{64} << 20, 1);
  EXPECT_TRUE(std::isfinite(gbs));
  EXPECT_GT(gbs, 0.1);    // any machine reads 64 MiB faster than 0.6 s
  EXPECT_LT(gbs, 1e5);    // and slower than 100 TB/s
}

TEST(RooflineTest, FmaPeakIsAPlausibleRate) {
  base::ThreadPool pool(2);
  const double gflops = MeasureFmaPeak(pool, 1);
  EXPECT_TRUE(std::isfinite(gflops));
  EXPECT_GT(gflops, 0.1);
  EXPECT_LT(gflops, 1e5);
}

}  // namespace
}  // namespace flashserve::kernels
