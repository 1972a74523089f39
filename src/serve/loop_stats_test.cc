// LoopStats' decaying averages: requests finished per second starts at the first rate measured,
// follows the rate it is fed, updates at most twice a second, decays when requests stop, and
// starts again from the first rate measured after a quiet spell.
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
  rate = stats.UpdateFinishRate(221.0, total);  // none finish: the average decays
  EXPECT_LT(rate, 40.0);
  EXPECT_GT(rate, 30.0);
  for (int i = 122; i <= 150; ++i) rate = stats.UpdateFinishRate(100.0 + i, total);  // a quiet spell
  EXPECT_EQ(rate, 0.0);
  rate = stats.UpdateFinishRate(251.0, total += 15);
  EXPECT_NEAR(rate, 15.0, 1e-9) << "after a quiet spell, the new rate as it is";
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
