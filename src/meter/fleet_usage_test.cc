// The fleet's usage from the ledger the workers write, refreshed by the sync thread
// (meter/fleet_usage.h): at the router, output tokens per minute and monthly spend; at a worker
// without a router, the fleet's requests, prompt tokens and output raising its own counts.
#include "meter/fleet_usage.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/wall_time.h"
#include "meter/scratch_store.h"

namespace flashserve::meter {
namespace {

using FleetUsageTest = StoreSuite;  // on each backend
FS_ON_EVERY_STORE_BACKEND(FleetUsageTest);

// A request that ended `ago_s` seconds ago on some worker.
UsageRecord Ended(const std::string& id, const std::string& tenant, int64_t output, int64_t cost, int64_t ago_s,
                  UsageStatus status = UsageStatus::kCompleted) {
  UsageRecord r;
  r.request_id = id;
  r.tenant = tenant;
  r.key_id = "k";
  r.model = "m";
  r.route = "/v1/chat/completions";
  r.end_us = base::UnixMicros() - ago_s * 1'000'000;
  r.arrival_us = r.end_us - 1'000'000;
  r.output_tokens = output;
  r.status = status;
  r.cost = cost;
  return r;
}

TEST_P(FleetUsageTest, OutputAndSpendOfEveryWorkerReachTheRoutersLimits) {
  // Two workers' records: acme made 30 + 50 tokens this minute (and 900 two minutes ago), plus
  // a stream still running (not counted until it ends).
  ASSERT_TRUE(store_->WriteUsage({Ended("w1-a", "acme", 30, 400, 5), Ended("w2-a", "acme", 50, 700, 20),
                                  Ended("w2-b", "acme", 900, 0, 120),
                                  Ended("w1-c", "acme", 77, 0, 1, UsageStatus::kInterrupted),
                                  Ended("w1-d", "beta", 10, 0, 3)})
                  .ok());
  auto seconds = store_->OutputBySecond(base::UnixMicros() - 60'000'000);
  ASSERT_TRUE(seconds.ok()) << seconds.error().ToString();
  int64_t acme = 0;
  for (const auto& [second, tokens] : (*seconds)["acme"]) acme += tokens;
  EXPECT_EQ(acme, 80);
  EXPECT_EQ((*seconds)["beta"].size(), 1u);

  TenantLimiter limiter;
  auto sync = FleetUsageSync::Start(store_.get(), &limiter, 0.05);
  ASSERT_TRUE(sync.ok()) << sync.error().ToString();
  Limits limits;
  limits.output_tokens_per_minute = 100;
  limits.monthly_budget = 2000;
  const int64_t now_s = base::UnixMicros() / 1'000'000;
  LimitDecision d = limiter.Admit("acme", limits, 1, now_s);
  ASSERT_TRUE(d.allowed);
  EXPECT_EQ(d.output_remaining, 20);
  EXPECT_EQ(limiter.spend("acme"), 1100);
  d.slot.reset();

  // Another worker ends a request: within a few passes the router refuses acme, not beta.
  ASSERT_TRUE(store_->WriteUsage({Ended("w1-c", "acme", 25, 950, 0)}).ok());  // the running one ends
  bool refused = false;
  for (int i = 0; i < 100 && !refused; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    refused = !limiter.Admit("acme", limits, 1, base::UnixMicros() / 1'000'000).allowed;
  }
  EXPECT_TRUE(refused);
  EXPECT_TRUE(limiter.Admit("beta", limits, 1, base::UnixMicros() / 1'000'000).allowed);
}

// A request that arrived `ago_s` seconds ago with an `input`-token prompt, still running.
UsageRecord Arrived(const std::string& id, const std::string& tenant, int64_t input, int64_t ago_s) {
  UsageRecord r = Ended(id, tenant, 0, 0, 0, UsageStatus::kInterrupted);
  r.arrival_us = base::UnixMicros() - ago_s * 1'000'000;
  r.end_us = r.arrival_us;
  r.input_uncached = input;
  return r;
}

TEST_P(FleetUsageTest, WorkersWithoutARouterShareTheMinute) {
  // This worker admits a request (5 prompt tokens) before its record is written.
  TenantLimiter limiter;
  Limits limits;
  limits.requests_per_minute = 5;
  limits.input_tokens_per_minute = 100;
  limits.output_tokens_per_minute = 50;
  const int64_t own_us = base::UnixMicros();
  ASSERT_TRUE(limiter.Admit("acme", limits, 5, own_us / 1'000'000).allowed);
  // Another worker's: three arrivals this minute (one cached in part, one still running), one
  // two minutes ago, 40 output tokens ended.
  UsageRecord cached = Ended("w2-a", "acme", 40, 0, 5);
  cached.input_uncached = 4;
  cached.cached_memory = 6;
  ASSERT_TRUE(store_->WriteUsage({cached, Arrived("w2-b", "acme", 20, 20), Arrived("w2-c", "acme", 30, 2),
                                  Arrived("w2-old", "acme", 500, 120), Arrived("w2-d", "beta", 7, 3)})
                  .ok());
  auto arrivals = store_->ArrivalsBySecond(base::UnixMicros() - 60'000'000);
  ASSERT_TRUE(arrivals.ok()) << arrivals.error().ToString();
  Arrivals acme;
  for (const auto& [second, a] : (*arrivals)["acme"]) {
    acme.requests += a.requests;
    acme.input_tokens += a.input_tokens;
  }
  EXPECT_EQ(acme.requests, 3);
  EXPECT_EQ(acme.input_tokens, 60);

  auto sync = FleetUsageSync::Start(store_.get(), &limiter, 0.05, FleetRole::kWorker);
  ASSERT_TRUE(sync.ok()) << sync.error().ToString();
  const int64_t next_us = base::UnixMicros();
  LimitDecision d = limiter.Admit("acme", limits, 10, next_us / 1'000'000);
  ASSERT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.requests_remaining, 0);  // 1 here + 3 elsewhere + this one
  EXPECT_EQ(d.input_remaining, 25);    // 100 - 5 - 60 - 10
  EXPECT_EQ(d.output_remaining, 10);   // 50 - 40
  EXPECT_EQ(limiter.Admit("acme", limits, 1, base::UnixMicros() / 1'000'000).reason, "requests per minute");
  EXPECT_TRUE(limiter.Admit("beta", limits, 1, base::UnixMicros() / 1'000'000).allowed);

  // This worker's own records reach the ledger: counted once, not twice.
  UsageRecord own = Arrived("w1-a", "acme", 5, 0);
  own.arrival_us = own_us;
  UsageRecord second = Arrived("w1-b", "acme", 10, 0);
  second.arrival_us = next_us;
  ASSERT_TRUE(store_->WriteUsage({own, second}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // several passes
  Limits wide = limits;
  wide.requests_per_minute = 100;
  wide.input_tokens_per_minute = 1000;
  LimitDecision after = limiter.Admit("acme", wide, 1, base::UnixMicros() / 1'000'000);
  ASSERT_TRUE(after.allowed);
  EXPECT_EQ(after.requests_remaining, 100 - 5 - 1);
  EXPECT_EQ(after.input_remaining, 1000 - 75 - 1);
}

TEST(FleetUsageStartTest, AnUnusableStoreIsAnErrorAtStart) {
  class Broken : public MeterStore {
   public:
    base::Status AddTenant(const Tenant&) override { return Fail(); }
    base::Status UpdateTenant(const Tenant&) override { return Fail(); }
    base::Status RemoveTenant(const std::string&, int64_t) override { return Fail(); }
    base::Result<std::optional<Tenant>> GetTenant(const std::string&) override { return Fail(); }
    base::Result<std::vector<Tenant>> ListTenants() override { return Fail(); }
    base::Status AddKey(const KeyRecord&) override { return Fail(); }
    base::Result<std::vector<KeyRecord>> ListKeys(const std::string&) override { return Fail(); }
    base::Status RevokeKey(const std::string&, int64_t) override { return Fail(); }
    base::Result<int64_t> Generation() override { return Fail(); }
    base::Status WriteUsage(const std::vector<UsageRecord>&) override { return Fail(); }
    base::Result<std::optional<UsageRecord>> GetUsage(const std::string&) override { return Fail(); }
    base::Result<std::vector<UsageRow>> QueryUsage(const UsageQuery&) override { return Fail(); }
    base::Result<std::map<std::string, std::map<int64_t, int64_t>>> OutputBySecond(int64_t) override { return Fail(); }
    base::Result<std::map<std::string, std::map<int64_t, Arrivals>>> ArrivalsBySecond(int64_t) override { return Fail(); }

   private:
    static base::Error Fail() { return base::Error(base::ErrorCode::kUnavailable, "server gone"); }
  } broken;
  TenantLimiter limiter;
  auto sync = FleetUsageSync::Start(&broken, &limiter, 0.05);
  ASSERT_FALSE(sync.ok());
  EXPECT_NE(sync.error().message().find("server gone"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::meter
