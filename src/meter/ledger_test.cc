// The ledger writer and the store's usage table: one record per request, final records never
// replaced, progress kept through failed writes, sums by group (meter/ledger.h, store.h).
#include "meter/ledger.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "meter/scratch_store.h"

namespace flashserve::meter {
namespace {

using LedgerTest = StoreSuite;  // on each backend
FS_ON_EVERY_STORE_BACKEND(LedgerTest);

UsageRecord Request(const std::string& id, const std::string& tenant, int64_t arrival_s, int64_t output) {
  UsageRecord r;
  r.request_id = id;
  r.tenant = tenant;
  r.key_id = "key_";
  r.key_id += tenant;
  r.model = "m";
  r.route = "/v1/chat/completions";
  r.arrival_us = arrival_s * 1'000'000;
  r.input_uncached = 100;
  r.cached_memory = 50;
  r.output_tokens = output;
  r.status = UsageStatus::kCompleted;
  r.rates = {1'000'000, 100'000, 2'000'000};  // 1 / 0.1 / 2 per million
  return r;
}

TEST_P(LedgerTest, ProgressThenFinalAndFinalNeverChanges) {
  Ledger ledger(store_.get(), 3600);  // flushed by hand
  UsageRecord r = Request("req-1", "acme", 1'796'000'000, 7);
  r.status = UsageStatus::kInterrupted;
  ledger.Put(r);
  ASSERT_TRUE(ledger.Flush().ok());
  auto got = store_->GetUsage("req-1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->status, UsageStatus::kInterrupted);
  EXPECT_EQ((*got)->output_tokens, 7);
  EXPECT_EQ((*got)->cost, 100 * 1 + 5 + 14);  // (100 x 1 + 50 x 0.1 + 7 x 2) micro-units
  r.status = UsageStatus::kCompleted;
  r.output_tokens = 9;
  ledger.Put(r);
  ASSERT_TRUE(ledger.Flush().ok());
  r.status = UsageStatus::kInterrupted;  // a late progress write must not undo the end
  r.output_tokens = 3;
  ledger.Put(r);
  ASSERT_TRUE(ledger.Flush().ok());
  got = store_->GetUsage("req-1");
  EXPECT_EQ((*got)->status, UsageStatus::kCompleted);
  EXPECT_EQ((*got)->output_tokens, 9);
  EXPECT_EQ(ledger.stats().written, 3);
}

TEST_P(LedgerTest, SumsByGroup) {
  Ledger ledger(store_.get(), 3600);
  ledger.Put(Request("a1", "acme", 1'796'000'000, 10));   // 2026-12-01 ...
  ledger.Put(Request("a2", "acme", 1'796'003'600, 20));   // an hour later
  ledger.Put(Request("b1", "beta", 1'796'090'000, 30));   // the next day
  UsageRecord f = Request("b2", "beta", 1'796'090'000, 0);
  f.status = UsageStatus::kFailed;
  ledger.Put(f);
  ASSERT_TRUE(ledger.Flush().ok());
  UsageQuery q;
  auto by_tenant = store_->QueryUsage(q);
  ASSERT_TRUE(by_tenant.ok());
  ASSERT_EQ(by_tenant->size(), 2u);
  EXPECT_EQ((*by_tenant)[0].group, "acme");
  EXPECT_EQ((*by_tenant)[0].requests, 2);
  EXPECT_EQ((*by_tenant)[0].output_tokens, 30);
  EXPECT_EQ((*by_tenant)[0].cost, 2 * 105 + 60);
  EXPECT_EQ((*by_tenant)[1].requests, 2);
  EXPECT_EQ((*by_tenant)[1].cost, 105 + 60);  // the failed request costs nothing
  q.group = UsageGroup::kHour;
  q.tenant = "acme";
  auto by_hour = store_->QueryUsage(q);
  ASSERT_EQ(by_hour->size(), 2u);
  q.group = UsageGroup::kDay;
  q.tenant = "";
  auto by_day = store_->QueryUsage(q);
  ASSERT_EQ(by_day->size(), 2u);
  q.from_us = int64_t{1'796'050'000} * 1'000'000;  // only the second day
  q.group = UsageGroup::kTotal;
  auto total = store_->QueryUsage(q);
  ASSERT_EQ(total->size(), 1u);
  EXPECT_EQ((*total)[0].requests, 2);
}

// A store whose writes fail until told otherwise (a full disk).
class FlakyStore : public MeterStore {
 public:
  explicit FlakyStore(MeterStore* real) : real_(real) {}
  std::atomic<bool> failing{true};
  base::Status AddTenant(const Tenant& t) override { return real_->AddTenant(t); }
  base::Status UpdateTenant(const Tenant& t) override { return real_->UpdateTenant(t); }
  base::Status RemoveTenant(const std::string& n, int64_t now) override { return real_->RemoveTenant(n, now); }
  base::Result<std::optional<Tenant>> GetTenant(const std::string& n) override { return real_->GetTenant(n); }
  base::Result<std::vector<Tenant>> ListTenants() override { return real_->ListTenants(); }
  base::Status AddKey(const KeyRecord& k) override { return real_->AddKey(k); }
  base::Result<std::vector<KeyRecord>> ListKeys(const std::string& t) override { return real_->ListKeys(t); }
  base::Status RevokeKey(const std::string& id, int64_t now) override { return real_->RevokeKey(id, now); }
  base::Result<int64_t> Generation() override { return real_->Generation(); }
  base::Status WriteUsage(const std::vector<UsageRecord>& r) override {
    if (failing) return base::Error(base::ErrorCode::kIoError, "disk full");
    return real_->WriteUsage(r);
  }
  base::Result<std::optional<UsageRecord>> GetUsage(const std::string& id) override { return real_->GetUsage(id); }
  base::Result<std::vector<UsageRow>> QueryUsage(const UsageQuery& q) override { return real_->QueryUsage(q); }
  base::Result<std::map<std::string, std::map<int64_t, int64_t>>> OutputBySecond(int64_t since_us) override {
    return real_->OutputBySecond(since_us);
  }
  base::Result<std::map<std::string, std::map<int64_t, Arrivals>>> ArrivalsBySecond(int64_t since_us) override {
    return real_->ArrivalsBySecond(since_us);
  }

 private:
  MeterStore* real_;
};

TEST_P(LedgerTest, FailedWritesKeepRecordsForTheNextPass) {
  FlakyStore flaky(store_.get());
  {
    Ledger ledger(&flaky, 0.05);
    ledger.Put(Request("x1", "acme", 1'796'000'000, 1));
    EXPECT_FALSE(ledger.Flush().ok());
    UsageRecord newer = Request("x1", "acme", 1'796'000'000, 5);  // progress while the disk is full
    ledger.Put(newer);
    EXPECT_EQ(ledger.stats().pending, 1);
    EXPECT_GE(ledger.stats().failed_writes, 1);
    flaky.failing = false;
    for (int i = 0; i < 200 && ledger.stats().pending > 0; ++i) usleep(10'000);  // the thread's next pass
    EXPECT_EQ(ledger.stats().pending, 0);
  }
  auto got = store_->GetUsage("x1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->output_tokens, 5);  // the newest state won
}

}  // namespace
}  // namespace flashserve::meter
