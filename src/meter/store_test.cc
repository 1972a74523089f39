// The SQLite metering store: tenants and keys round-trip, errors by kind, the generation bumps
// on every change, two connections see each other's writes (meter/store.h).
#include "meter/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "meter/api_keys.h"

namespace flashserve::meter {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/fs-meter-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/meter.db";
  }
  void TearDown() override { (void)std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_, path_;
};

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

TEST_F(StoreTest, TenantsRoundTripAndErrorsHaveKinds) {
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

TEST_F(StoreTest, KeysNeedATenantAndRevokeWithIt) {
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

TEST_F(StoreTest, GenerationBumpsAndAnotherConnectionSeesChanges) {
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

TEST_F(StoreTest, UnusableLocationsAreClearErrors) {
  auto pg = OpenMeterStore("postgresql://127.0.0.1/meter");
  ASSERT_FALSE(pg.ok());
  EXPECT_EQ(pg.error().code(), base::ErrorCode::kUnimplemented);
  auto missing_dir = OpenMeterStore(dir_ + "/no/such/dir/meter.db");
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.error().message().find("no/such/dir"), std::string::npos);
  FILE* junk = std::fopen(path_.c_str(), "w");
  std::fputs("this is not a database, just text long enough to fill a header page.....................", junk);
  std::fclose(junk);
  auto corrupt = OpenMeterStore(path_);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.error().message().find("not a database"), std::string::npos) << corrupt.error().message();
}

}  // namespace
}  // namespace flashserve::meter
