#include "kernels/roofline.h"

#include "kernels/gemm/matmul.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

namespace flashserve::kernels {
namespace {

TEST(RooflineTest, BandwidthIsAPlausibleRate) {
  base::ThreadPool pool(2);
  const double gbs = MeasureMemoryBandwidth(pool, int64_t{64} << 20, 1);
  EXPECT_TRUE(std::isfinite(gbs));
  EXPECT_GT(gbs, 0.1);    // any machine reads 64 MiB faster than 0.6 s
  EXPECT_LT(gbs, 1e5);    // and slower than 100 TB/s
}

TEST(RooflineTest, BandwidthWindowsAreOnePerWindowAndPass) {
  base::ThreadPool pool(2);
  const std::vector<double> rates = MemoryBandwidthWindows(pool, int64_t{128} << 20, 3);  // 2 windows x 3
  ASSERT_EQ(rates.size(), 6u);
  for (double gbs : rates) {
    EXPECT_TRUE(std::isfinite(gbs));
    EXPECT_GT(gbs, 0.1);
  }
}

// The probe over memory the caller holds reads it all (a wrong window stride would read a
// fraction and report a rate far above the buffer probe's).
TEST(RooflineTest, ReadProbeOverCallerMemoryIsAPlausibleRate) {
  base::ThreadPool pool(2);
  std::vector<uint8_t> region(size_t{192} << 20, 1);
  const double gbs = MeasureReadBandwidth(pool, region, 1);
  EXPECT_TRUE(std::isfinite(gbs));
  EXPECT_GT(gbs, 0.1);
  EXPECT_LT(gbs, 1e5);
  const double own = MeasureMemoryBandwidth(pool, int64_t{192} << 20, 1);
  EXPECT_LT(gbs, 4 * own) << "own buffer " << own;
}

TEST(RooflineTest, FmaPeakIsAPlausibleRate) {
  base::ThreadPool pool(2);
  const double gflops = MeasureFmaPeak(pool, 1);
  EXPECT_TRUE(std::isfinite(gflops));
  EXPECT_GT(gflops, 0.1);
  EXPECT_LT(gflops, 1e5);
}

TEST(RooflineTest, AmxPeakIsAPlausibleRateWhereAmxIsOn) {
  base::ThreadPool pool(2);
  const double gflops = MeasureAmxPeak(pool, 1);
  if (!AmxOn()) {
    EXPECT_EQ(gflops, 0.0);
    GTEST_SKIP() << "no AMX here";
  }
  EXPECT_GT(gflops, MeasureFmaPeak(pool, 1));  // a tile unit does more than the vector pipes
  EXPECT_LT(gflops, 1e6);
}

// Threads of other work on the probe's core (another process, a parallel build) slow its wall
// clock, not its rate per CPU-second, which is how MeasureFmaPeak tells that the cores were
// shared. The probe thread and eight spinning threads share one CPU, so every pass is
// interrupted.
TEST(RooflineTest, FmaProbeSeesOtherWorkOnItsCore) {
  cpu_set_t mine;
  ASSERT_EQ(0, sched_getaffinity(0, sizeof mine, &mine));
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (cpu == CPU_SETSIZE || pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
    GTEST_SKIP() << "cannot pin threads to one CPU here";
  base::ThreadPool pool(1);  // the probe runs on this thread
  const FmaProbe quiet = ProbeFma(pool, 10);
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < 8; ++i)
    busy.emplace_back([&stop, &one] {
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      volatile uint64_t spin = 0;
      while (!stop.load(std::memory_order_relaxed)) spin = spin + 1;
    });
  const FmaProbe shared = ProbeFma(pool, 10);
  stop = true;
  for (std::thread& t : busy) t.join();
  pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
  if (quiet.cpu_gflops == 0.0) GTEST_SKIP() << "no thread CPU clock here";
  EXPECT_GT(shared.cpu_gflops, 0.6 * quiet.wall_gflops) << "quiet " << quiet.wall_gflops;
  EXPECT_LT(shared.wall_gflops, 0.8 * shared.cpu_gflops) << "quiet " << quiet.wall_gflops;
}

}  // namespace
}  // namespace flashserve::kernels
