// The metering store on both backends (SQLite, PostgreSQL): tenants and keys round-trip, errors
// by kind, the generation bumps on every change, two connections see each other's writes, and
// unusable locations are clear errors (meter/store.h).
#include "meter/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "meter/api_keys.h"
#include "meter/scratch_store.h"
#include "meter/sql_db.h"

namespace flashserve::meter {
namespace {

// On each backend; path_ for opening more connections.
class StoreTest : public StoreSuite {
 protected:
  void SetUp() override {
    StoreSuite::SetUp();
    path_ = scratch_.location();
  }
  std::string path_;
};
FS_ON_EVERY_STORE_BACKEND(StoreTest);

Tenant Acme() {
  Tenant t;
  t.name = "acme";
  t.cache_namespace = "acme";
  t.ttl_class = "agent";
  t.prices.standard = {150000, 3000, 600000};
  t.prices.off_peak = OffPeak{990, 30, {75000, 1500, 300000}};
  t.limits = {60, 100000, 20000, 4, 100'000'000};
  t.created = 1'790'000'000;
  return t;
}

KeyRecord KeyFor(const std::string& tenant, const std::string& secret) {
  return KeyRecord{NewKeyId(), tenant, "test", KeyDigest(secret), secret.substr(0, 8), 1'790'000'100, 0};
}

TEST_P(StoreTest, TenantsRoundTripAndErrorsHaveKinds) {
  auto store = OpenMeterStore(path_);
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  MeterStore& s = **store;
  ASSERT_TRUE(s.AddTenant(Acme()).ok());
  auto got = s.GetTenant("acme");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, Acme());
  EXPECT_EQ(s.AddTenant(Acme()).error().code(), base::ErrorCode::kAlreadyExists);
  Tenant bad = Acme();
  bad.name = "no spaces";
  EXPECT_EQ(s.AddTenant(bad).error().code(), base::ErrorCode::kInvalidArgument);

  Tenant changed = Acme();
  changed.prices.off_peak.reset();
  changed.log_text = true;
  changed.created = 5;  // not changed by an update
  ASSERT_TRUE(s.UpdateTenant(changed).ok());
  got = s.GetTenant("acme");
  EXPECT_FALSE((*got)->prices.off_peak.has_value());
  EXPECT_TRUE((*got)->log_text);
  EXPECT_EQ((*got)->created, Acme().created);
  changed.name = "ghost";
  EXPECT_EQ(s.UpdateTenant(changed).error().code(), base::ErrorCode::kNotFound);
  EXPECT_FALSE(s.GetTenant("ghost")->has_value());
}

TEST_P(StoreTest, KeysNeedATenantAndRevokeWithIt) {
  auto store = OpenMeterStore(path_);
  ASSERT_TRUE(store.ok());
  MeterStore& s = **store;
  EXPECT_EQ(s.AddKey(KeyFor("acme", "fsk-aaaaaaaa")).error().code(), base::ErrorCode::kNotFound);
  ASSERT_TRUE(s.AddTenant(Acme()).ok());
  const KeyRecord a = KeyFor("acme", "fsk-aaaaaaaa"), b = KeyFor("acme", "fsk-bbbbbbbb");
  ASSERT_TRUE(s.AddKey(a).ok());
  ASSERT_TRUE(s.AddKey(b).ok());
  KeyRecord same_digest = KeyFor("acme", "fsk-aaaaaaaa");
  EXPECT_EQ(s.AddKey(same_digest).error().code(), base::ErrorCode::kAlreadyExists);
  ASSERT_TRUE(s.RevokeKey(a.id, 1'790'000'200).ok());
  EXPECT_EQ(s.RevokeKey(a.id, 1'790'000'300).error().code(), base::ErrorCode::kNotFound);  // already revoked
  auto keys = s.ListKeys("acme");
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  for (const KeyRecord& k : *keys) EXPECT_EQ(k.revoked, k.id == a.id ? 1'790'000'200 : 0) << k.id;
  ASSERT_TRUE(s.RemoveTenant("acme", 1'790'000'400).ok());
  EXPECT_EQ(s.RemoveTenant("acme", 1'790'000'400).error().code(), base::ErrorCode::kNotFound);
  keys = s.ListKeys("");
  ASSERT_EQ(keys->size(), 2u);  // kept, revoked
  for (const KeyRecord& k : *keys) EXPECT_NE(k.revoked, 0) << k.id;
}

TEST_P(StoreTest, GenerationBumpsAndAnotherConnectionSeesChanges) {
  auto writer = OpenMeterStore(path_);
  auto reader = OpenMeterStore(path_);
  ASSERT_TRUE(writer.ok() && reader.ok());
  const int64_t g0 = *(*reader)->Generation();
  ASSERT_TRUE((*writer)->AddTenant(Acme()).ok());
  const int64_t g1 = *(*reader)->Generation();
  EXPECT_GT(g1, g0);
  EXPECT_TRUE((*reader)->GetTenant("acme")->has_value());
  EXPECT_FALSE((*writer)->AddTenant(Acme()).ok());  // a failed change rolls back and bumps nothing
  EXPECT_EQ(*(*reader)->Generation(), g1);
  ASSERT_TRUE((*writer)->AddKey(KeyFor("acme", "fsk-cccccccc")).ok());
  EXPECT_GT(*(*reader)->Generation(), g1);
}

TEST_P(StoreTest, UsageUpsertKeepsFinalRecordsAndSumsByUtcDayAndHour) {
  auto store = OpenMeterStore(path_);
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  MeterStore& s = **store;
  auto record = [](const std::string& id, const std::string& tenant, int64_t arrival_s, int64_t output) {
    UsageRecord r;
    r.request_id = id;
    r.tenant = tenant;
    r.key_id = "k-" + tenant;
    r.model = "m";
    r.route = "/v1/messages";
    r.arrival_us = arrival_s * 1'000'000 + 999'999;
    r.input_uncached = 7;
    r.output_tokens = output;
    r.status = UsageStatus::kCompleted;
    r.currency = "USD";
    r.cost = 5'000'000'000'000 + output;  // beyond 32 bits
    return r;
  };
  UsageRecord cut = record("r1", "acme", 1'796'083'199, 3);  // 2026-11-30T23:59:59Z
  cut.status = UsageStatus::kInterrupted;
  ASSERT_TRUE(s.WriteUsage({cut, record("r2", "acme", 1'796'083'200, 4)}).ok());  // 2026-12-01T00:00:00Z
  UsageRecord done = record("r1", "acme", 1'796'083'199, 9);
  ASSERT_TRUE(s.WriteUsage({done}).ok());
  UsageRecord late = record("r1", "acme", 1'796'083'199, 1);
  late.status = UsageStatus::kInterrupted;
  ASSERT_TRUE(s.WriteUsage({late, record("r3", "beta", 1'796'086'800, 5)}).ok());
  auto r1 = s.GetUsage("r1");
  ASSERT_TRUE(r1.ok() && r1->has_value());
  EXPECT_EQ((*r1)->output_tokens, 9);
  EXPECT_EQ((*r1)->status, UsageStatus::kCompleted);
  EXPECT_EQ((*r1)->cost, 5'000'000'000'009);
  EXPECT_EQ((*r1)->arrival_us, int64_t{1'796'083'199} * 1'000'000 + 999'999);

  UsageQuery q;
  q.group = UsageGroup::kDay;
  auto days = s.QueryUsage(q);
  ASSERT_TRUE(days.ok()) << days.error().ToString();
  ASSERT_EQ(days->size(), 2u);
  EXPECT_EQ((*days)[0].group, "2026-11-30");
  EXPECT_EQ((*days)[0].output_tokens, 9);
  EXPECT_EQ((*days)[1].group, "2026-12-01");
  EXPECT_EQ((*days)[1].requests, 2);
  EXPECT_EQ((*days)[1].cost, 10'000'000'000'009);
  q.group = UsageGroup::kHour;
  auto hours = s.QueryUsage(q);
  ASSERT_TRUE(hours.ok());
  ASSERT_EQ(hours->size(), 3u);
  EXPECT_EQ((*hours)[0].group, "2026-11-30T23");
  EXPECT_EQ((*hours)[2].group, "2026-12-01T01");
  q.group = UsageGroup::kTotal;
  q.tenant = "acme";
  auto total = s.QueryUsage(q);
  ASSERT_TRUE(total.ok());
  ASSERT_EQ(total->size(), 1u);
  EXPECT_EQ((*total)[0].group, "");
  EXPECT_EQ((*total)[0].requests, 2);
  EXPECT_EQ((*total)[0].input_uncached, 14);
  EXPECT_EQ((*total)[0].currency, "USD");
}

TEST_P(StoreTest, OlderSchemasAreUpgradedAndNewerOnesRefused) {
  auto db = GetParam() == StoreBackend::kSqlite ? OpenSqlite(path_) : OpenPostgres(path_);
  ASSERT_TRUE(db.ok()) << db.error().ToString();
  // A store as the first release made it: no end-time index, no `ddl` row.
  ASSERT_TRUE((*db)->Exec("DROP INDEX ledger_by_end; DELETE FROM meter_meta WHERE name = 'ddl'").ok());
  auto reopened = OpenMeterStore(path_);
  ASSERT_TRUE(reopened.ok()) << reopened.error().ToString();
  auto meta = (*db)->Query("SELECT name, value FROM meter_meta WHERE name IN ('schema', 'ddl') ORDER BY name", {});
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->size(), 2u);
  EXPECT_EQ((*meta)[0].Int(1), 2);  // ddl raised
  EXPECT_EQ((*meta)[1].Int(1), 1);  // schema: still usable by builds that know version 1
  auto index = (*db)->Query(GetParam() == StoreBackend::kSqlite
                                ? "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'ledger_by_end'"
                                : "SELECT indexname FROM pg_indexes WHERE indexname = 'ledger_by_end' AND schemaname = current_schema()",
                            {});
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->size(), 1u);  // the upgrade made it
  ASSERT_TRUE((*db)->Exec("UPDATE meter_meta SET value = 99 WHERE name = 'schema'").ok());
  auto newer = OpenMeterStore(path_);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.error().code(), base::ErrorCode::kFailedPrecondition);
  EXPECT_NE(newer.error().message().find("newer flashserve (version 99"), std::string::npos);
}

TEST(StoreLocationTest, UnusableLocationsAreClearErrors) {
  ScratchStore scratch;
  ASSERT_EQ(scratch.Prepare(StoreBackend::kSqlite), "");
  const std::string path = scratch.location();
  const std::string dir = path.substr(0, path.rfind('/'));
  auto missing_dir = OpenMeterStore(dir + "/no/such/dir/meter.db");
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.error().message().find("no/such/dir"), std::string::npos);
  FILE* junk = std::fopen(path.c_str(), "w");
  std::fputs("this is not a database, just text long enough to fill a header page.....................", junk);
  std::fclose(junk);
  auto corrupt = OpenMeterStore(path);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.error().message().find("not a database"), std::string::npos) << corrupt.error().message();
  EXPECT_EQ(OpenMeterStore(dir + "/absent.db", /*create=*/false).error().code(), base::ErrorCode::kNotFound);
}

TEST(StoreLocationTest, AnUnreachableServerIsUnavailableAndItsPasswordIsNotShown) {
  auto pg = OpenMeterStore("postgresql://meter:s3cret-pw@127.0.0.1:1/meter");
  ASSERT_FALSE(pg.ok());
  EXPECT_EQ(pg.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_NE(pg.error().message().find("postgresql://meter:***@127.0.0.1:1/meter"), std::string::npos)
      << pg.error().message();
  EXPECT_EQ(pg.error().message().find("s3cret"), std::string::npos) << pg.error().message();
  EXPECT_EQ(RedactedUrl("postgres://host/db"), "postgres://host/db");
  EXPECT_EQ(RedactedUrl("postgresql://u@host:5432/db"), "postgresql://u@host:5432/db");
  EXPECT_EQ(RedactedUrl("postgresql://u@host/db?sslmode=require&password=pw&x=1"),
            "postgresql://u@host/db?sslmode=require&password=***&x=1");
}

TEST(StoreLocationTest, APostgresStoreReconnectsAfterTheServerCutsIt) {
  ScratchStore scratch;
  const std::string why_not = scratch.Prepare(StoreBackend::kPostgres);
  if (!why_not.empty()) GTEST_SKIP() << why_not;
  auto store = OpenMeterStore(scratch.location());
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  ASSERT_TRUE((*store)->AddTenant(Acme()).ok());
  ASSERT_TRUE(scratch.CutConnections());
  auto g = (*store)->Generation();  // idle when cut: reconnected and answered
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  EXPECT_EQ(*g, 1);
  ASSERT_TRUE(scratch.CutConnections());
  Tenant beta = Acme();
  beta.name = "beta";
  EXPECT_TRUE((*store)->AddTenant(beta).ok());
  EXPECT_EQ((*store)->ListTenants()->size(), 2u);

  // Cut inside a transaction: the statement fails, the rest of the transaction cannot run on
  // its own, and after ROLLBACK the connection serves again.
  auto db = OpenPostgres(scratch.location());
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Exec("BEGIN").ok());
  ASSERT_TRUE((*db)->Run("UPDATE meter_meta SET value = value + 100 WHERE name = 'generation'", {}).ok());
  ASSERT_TRUE(scratch.CutConnections());
  EXPECT_EQ((*db)->Run("UPDATE meter_meta SET value = value + 100 WHERE name = 'generation'", {}).error().code(),
            base::ErrorCode::kUnavailable);
  EXPECT_FALSE((*db)->Exec("COMMIT").ok());
  EXPECT_TRUE((*db)->Exec("ROLLBACK").ok());
  auto rows = (*db)->Query("SELECT value FROM meter_meta WHERE name = 'generation'", {});
  ASSERT_TRUE(rows.ok()) << rows.error().ToString();
  EXPECT_EQ((*rows)[0].Int(0), 2);  // neither update landed
}

TEST(StoreLocationTest, ConcurrentOpensOfOneNewPostgresStoreAllSucceed) {
  ScratchStore scratch;
  const std::string why_not = scratch.Prepare(StoreBackend::kPostgres);
  if (!why_not.empty()) GTEST_SKIP() << why_not;
  std::vector<std::thread> openers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    openers.emplace_back([&] {
      auto store = OpenMeterStore(scratch.location());
      if (store.ok() && (*store)->Generation().ok()) ++ok;
    });
  for (auto& t : openers) t.join();
  EXPECT_EQ(ok.load(), 4);
}

}  // namespace
}  // namespace flashserve::meter
