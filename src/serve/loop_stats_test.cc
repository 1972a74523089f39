// LoopStats' decaying averages: requests finished per second starts at the first rate measured,
// follows the rate it is fed, updates at most twice a second, and decays when requests stop.
#include "serve/loop_stats.h"

#include <gtest/gtest.h>

namespace flashserve::serve {
namespace {

TEST(LoopStatsTest, FinishRateFollowsTheRateAndDecays) {
  LoopStats stats(100.0);
  EXPECT_EQ(stats.UpdateFinishRate(100.2, 50), 0.0) << "no update within half a second";
  double rate = 0;
  int64_t total = 0;
  rate = stats.UpdateFinishRate(101.0, total += 20);  // 20 per second
  EXPECT_NEAR(rate, 20.0, 1e-9) << "the first measurement as it is";
  for (int i = 2; i <= 30; ++i) rate = stats.UpdateFinishRate(100.0 + i, total += (i % 2 ? 10 : 30));
  EXPECT_NEAR(rate, 20.0, 5.0);
  for (int i = 31; i <= 120; ++i) rate = stats.UpdateFinishRate(100.0 + i, total += 40);  // 40 per second
  EXPECT_NEAR(rate, 40.0, 0.1);
  for (int i = 121; i <= 150; ++i) rate = stats.UpdateFinishRate(100.0 + i, total);  // none finish
  EXPECT_LT(rate, 40.0 * 0.1);
  EXPECT_GT(rate, 0.0);
}

TEST(LoopStatsTest, BusyFractionIsTheShareOfPrefillTime) {
  LoopStats stats(0.0);
  const std::vector<sched::StepItem> prefill = {sched::StepItem{nullptr, 0, 64}};
  stats.RecordStep(prefill, 0.5, true);
  const double busy = stats.UpdateBusyFraction(1.0);
  EXPECT_NEAR(busy, 0.5, 0.01);
  EXPECT_GT(stats.prefill_seconds_per_token(), 0.0);
}

}  // namespace
}  // namespace flashserve::serve
