// LogThrottle: one line per interval, the rest counted.
#include "base/log.h"

#include <gtest/gtest.h>

namespace flashserve::base {
namespace {

TEST(LogThrottleTest, LetsOneLinePerIntervalThroughAndCountsTheRest) {
  LogThrottle throttle(10);
  int64_t held = -1;
  EXPECT_TRUE(throttle.Allow(100.0, &held));
  EXPECT_EQ(held, 0);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(throttle.Allow(100.0 + i, &held));
  EXPECT_FALSE(throttle.Allow(109.9, &held));
  EXPECT_TRUE(throttle.Allow(110.0, &held));
  EXPECT_EQ(held, 6);
  EXPECT_TRUE(throttle.Allow(500.0, &held));  // nothing held back in between
  EXPECT_EQ(held, 0);
}

TEST(LogThrottleTest, NotesHowManyWereHeldBack) {
  EXPECT_EQ(WithHeldBack("disk error", 0), "disk error");
  EXPECT_EQ(WithHeldBack("disk error", 41), "disk error (41 more like it not logged since the last)");
}

}  // namespace
}  // namespace flashserve::base
