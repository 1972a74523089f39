// The router's view of the fleet's usage: output tokens per minute and monthly spend read from
// the ledger the workers write, refreshed by the sync thread (meter/fleet_usage.h).
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
