// Prices of usage records, time parsing and query parameters (meter/usage.h).
#include "meter/usage.h"

#include <gtest/gtest.h>

#include <climits>

namespace flashserve::meter {
namespace {

UsageRecord Sample(UsageStatus status) {
  UsageRecord r;
  r.status = status;
  r.input_uncached = 1000;
  r.cached_memory = 3000;
  r.cached_disk = 500;
  r.cached_shared = 400;
  r.cached_prefill = 100;
  r.output_tokens = 250;
  r.rates = {150000, 3000, 600000};  // $0.15 / $0.003 / $0.60 per million
  return r;
}

TEST(UsageTest, PricesRoundHalfUpAndFollowTheStatus) {
  UsageRecord r = Sample(UsageStatus::kCompleted);
  PriceRecord(&r);
  // 1000 x 0.15 + 4000 x 0.003 + 250 x 0.60 = 150 + 12 + 150 micro-dollars.
  EXPECT_EQ(r.cost, 312);
  r.rates = {1, 0, 0};
  r.input_uncached = 500'000;  // 0.5 micro-units: rounds up
  PriceRecord(&r);
  EXPECT_EQ(r.cost, 1);
  r.input_uncached = 499'999;
  PriceRecord(&r);
  EXPECT_EQ(r.cost, 0);

  UsageRecord failed = Sample(UsageStatus::kFailed);
  PriceRecord(&failed);
  EXPECT_EQ(failed.cost, 0);
  UsageRecord cancelled = Sample(UsageStatus::kCancelled);
  cancelled.output_tokens = 0;  // nothing reached the client: nothing billed
  PriceRecord(&cancelled);
  EXPECT_EQ(cancelled.cost, 0);
  cancelled.output_tokens = 10;
  PriceRecord(&cancelled);
  EXPECT_EQ(cancelled.cost, 150 + 12 + 6);
  UsageRecord huge = Sample(UsageStatus::kCompleted);
  huge.output_tokens = int64_t{1} << 40;  // no overflow on the way
  huge.rates.output = 1'000'000'000'000;
  PriceRecord(&huge);
  EXPECT_EQ(huge.cost, 162 + ((int64_t{1} << 40) * 1'000'000));
  huge.output_tokens = int64_t{1} << 62;  // beyond int64 micro-units: saturates
  PriceRecord(&huge);
  EXPECT_EQ(huge.cost, INT64_MAX);
}

TEST(UsageTest, TimesAndQueries) {
  EXPECT_EQ(*ParseUsageTime("2026-12-01"), int64_t{1'796'083'200} * 1'000'000);
  EXPECT_EQ(*ParseUsageTime("2026-12-01T10:00:00Z"), (int64_t{1'796'083'200} + 36000) * 1'000'000);
  EXPECT_EQ(*ParseUsageTime("1796083200"), int64_t{1'796'083'200} * 1'000'000);
  for (const char* bad : {"2026-13-01", "yesterday", "2026-12-01 10:00", "-5", "2026-12-01T10:00:00",
                          "2026-12-01T10:00:00X", "2026-02-31",
                          // signs and spaces in a field once parsed (10:-1 as 09:59)
                          "2026-12-01T10:-1:00Z", "2026-12-01T10:00:-1Z", "2026-+1-01", "2026-12- 1",
                          "2026-12-01T10:00:60Z", "2026-12-01T24:00:00Z"})
    EXPECT_FALSE(ParseUsageTime(bad).ok()) << bad;
  const int64_t now = (int64_t{1'796'600'000}) * 1'000'000;  // 2026-12-07
  auto q = MakeUsageQuery("", "", "", "", now);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->from_us, int64_t{1'796'083'200} * 1'000'000);  // the month's first day
  EXPECT_EQ(q->to_us, now + 1);
  EXPECT_EQ(q->group, UsageGroup::kTenant);
  EXPECT_FALSE(MakeUsageQuery("2026-12-02", "2026-12-01", "", "", now).ok());
  EXPECT_FALSE(MakeUsageQuery("", "", "bad tenant", "", now).ok());
  EXPECT_FALSE(MakeUsageQuery("", "", "", "week", now).ok());
  EXPECT_EQ(MakeUsageQuery("", "", "acme", "hour", now)->group, UsageGroup::kHour);
}

}  // namespace
}  // namespace flashserve::meter
