// Per-tenant limits: sliding minute windows, concurrency slots, monthly budgets (meter/limiter.h).
#include "meter/limiter.h"

#include <gtest/gtest.h>

namespace flashserve::meter {
namespace {

constexpr int64_t kT = 1'796'000'000;  // a Unix second

TEST(LimiterTest, RequestsPerMinuteSlideAndSayWhenToRetry) {
  TenantLimiter limiter;
  Limits limits;
  limits.requests_per_minute = 3;
  std::vector<std::unique_ptr<LimitSlot>> held;
  for (int i = 0; i < 3; ++i) {
    LimitDecision d = limiter.Admit("acme", limits, 10, kT + i * 10);  // at +0, +10, +20 s
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.requests_remaining, 2 - i);
    held.push_back(std::move(d.slot));
  }
  LimitDecision refused = limiter.Admit("acme", limits, 10, kT + 30);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.reason, "requests per minute");
  EXPECT_EQ(refused.retry_after_s, 30);  // the +0 request leaves the window at +60
  EXPECT_EQ(refused.requests_reset_s, 50);  // the +20 request leaves at +80
  EXPECT_EQ(refused.output_reset_s, 0);     // nothing in that window
  EXPECT_TRUE(limiter.Admit("beta", limits, 10, kT + 30).allowed);  // tenants apart
  LimitDecision later = limiter.Admit("acme", limits, 10, kT + 60);
  EXPECT_TRUE(later.allowed);
  EXPECT_EQ(later.requests_reset_s, 60);
}

TEST(LimiterTest, TokensConcurrencyAndBudget) {
  TenantLimiter limiter;
  Limits limits;
  limits.input_tokens_per_minute = 1000;
  limits.output_tokens_per_minute = 50;
  limits.concurrent_requests = 2;
  limits.monthly_budget = 1000;
  LimitDecision a = limiter.Admit("acme", limits, 600, kT);
  ASSERT_TRUE(a.allowed);
  EXPECT_EQ(a.input_remaining, 400);
  LimitDecision big = limiter.Admit("acme", limits, 500, kT);
  EXPECT_FALSE(big.allowed);
  EXPECT_EQ(big.reason, "input tokens per minute");
  LimitDecision b = limiter.Admit("acme", limits, 100, kT);
  ASSERT_TRUE(b.allowed);
  LimitDecision third = limiter.Admit("acme", limits, 1, kT);
  EXPECT_FALSE(third.allowed);
  EXPECT_EQ(third.reason, "concurrent requests");
  EXPECT_EQ(limiter.concurrent("acme"), 2);
  b.slot->Finish(60, 400, kT + 1);  // 60 output tokens: over the output limit for a minute
  b.slot.reset();
  EXPECT_EQ(limiter.concurrent("acme"), 1);
  LimitDecision after = limiter.Admit("acme", limits, 1, kT + 2);
  EXPECT_FALSE(after.allowed);
  EXPECT_EQ(after.reason, "output tokens per minute");
  EXPECT_EQ(after.retry_after_s, 59);
  // The budget: 400 ended here, not yet written; a sync keeps it on top of the store's sums.
  EXPECT_EQ(limiter.spend("acme"), 400);
  limiter.SyncSpend({{"acme", 300}}, kT - 86400);
  EXPECT_EQ(limiter.spend("acme"), 700);
  limiter.Written("acme", 400);  // the ledger wrote it: now among the store's
  EXPECT_EQ(limiter.spend("acme"), 700);
  limiter.SyncSpend({{"acme", 1100}}, kT - 86400);  // 700 + 400 more from other workers
  EXPECT_EQ(limiter.spend("acme"), 1100);
  LimitDecision broke = limiter.Admit("acme", limits, 1, kT + 120);
  EXPECT_FALSE(broke.allowed);
  EXPECT_TRUE(broke.budget);
  EXPECT_EQ(broke.reason, "monthly budget");
  EXPECT_GT(broke.retry_after_s, 3600);  // kT is mid-month: the wait is to the next month
  limiter.SyncSpend({}, kT);  // a new month
  EXPECT_TRUE(limiter.Admit("acme", limits, 1, kT + 120).allowed);
  const LimitDecision prompt_alone = limiter.Admit("acme", limits, 5000, kT + 300);
  EXPECT_FALSE(prompt_alone.allowed);
  EXPECT_TRUE(prompt_alone.never);  // no wait helps
  EXPECT_EQ(prompt_alone.retry_after_s, 0);
}

TEST(LimiterTest, TheFleetsOutputReplacesWhatWasCountedHere) {
  TenantLimiter limiter;
  Limits limits;
  limits.output_tokens_per_minute = 100;
  LimitDecision d = limiter.Admit("acme", limits, 1, kT);
  ASSERT_TRUE(d.allowed);
  d.slot->Finish(60, 0, kT);  // counted here
  // The ledger says the fleet produced 70 + 40 tokens in the last minute (one second too old).
  limiter.SyncOutput({{"acme", {{kT - 80, 500}, {kT - 49, 70}, {kT + 10, 40}}}}, kT + 10);
  LimitDecision refused = limiter.Admit("acme", limits, 1, kT + 10);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.reason, "output tokens per minute");
  EXPECT_EQ(refused.retry_after_s, 1);      // the 70 tokens of kT - 49 leave the window at kT + 11
  EXPECT_EQ(refused.output_reset_s, 60);    // the newest leave at kT + 70
  limiter.SyncOutput({{"acme", {{kT + 10, 40}}}}, kT + 11);
  LimitDecision allowed = limiter.Admit("acme", limits, 1, kT + 11);
  EXPECT_TRUE(allowed.allowed);
  EXPECT_EQ(allowed.output_remaining, 60);
  limiter.SyncOutput({}, kT + 12);  // a tenant absent from the ledger has produced nothing
  EXPECT_EQ(limiter.Admit("acme", limits, 1, kT + 12).output_remaining, 100);
}

}  // namespace
}  // namespace flashserve::meter
