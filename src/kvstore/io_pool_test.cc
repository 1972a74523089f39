// The store's I/O helpers (kvstore/io_pool.h): IoPool's read-first order, RateLimiter and
// BandwidthMeter.
#include "kvstore/io_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"

namespace flashserve::kvstore {
namespace {

TEST(IoPoolTest, RunsEverythingAndReadsGoFirst) {
  IoPool pool(1);
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<bool> release{false};
  pool.Submit(IoPool::Priority::kWrite, [&] {
    while (!release.load()) std::this_thread::yield();  // hold the only thread while we queue
  });
  pool.Submit(IoPool::Priority::kWrite, [&] { std::lock_guard<std::mutex> l(mu); order.push_back("w"); });
  pool.Submit(IoPool::Priority::kRead, [&] { std::lock_guard<std::mutex> l(mu); order.push_back("r"); });
  release = true;
  pool.Drain();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "r");
  pool.Stop();
  EXPECT_FALSE(pool.Submit(IoPool::Priority::kRead, [] {}));
}

TEST(RateLimiterTest, PacesAndCancels) {
  RateLimiter limiter(100);
  const double start = base::MonotonicSeconds();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(limiter.Acquire(1, nullptr));
  EXPECT_GE(base::MonotonicSeconds() - start, 0.25);  // 10 burst + 30 at 100/s
  std::atomic<bool> cancel{true};
  EXPECT_FALSE(limiter.Acquire(1000, &cancel));
}

TEST(BandwidthMeterTest, PriorThenMovingAverage) {
  BandwidthMeter meter(1e9);
  EXPECT_FALSE(meter.measured());
  EXPECT_DOUBLE_EQ(meter.BytesPerSecond(), 1e9);
  meter.Record(1000, 0);  // ignored
  EXPECT_FALSE(meter.measured());
  meter.Record(1'000'000, 0.01);
  EXPECT_DOUBLE_EQ(meter.BytesPerSecond(), 1e8);
  for (int i = 0; i < 100; ++i) meter.Record(1'000'000, 0.001);
  EXPECT_NEAR(meter.BytesPerSecond(), 1e9, 1e7);
}

}  // namespace
}  // namespace flashserve::kvstore
