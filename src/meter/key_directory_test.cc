// The live key ring: keys created, revoked or moved between tenants in the store reach the
// ring within the refresh interval; static keys stay (meter/key_directory.h).
#include "meter/key_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace flashserve::meter {
namespace {

net::HttpRequest WithKey(const std::string& key) {
  net::HttpRequest r;
  r.headers = {{"Authorization", "Bearer " + key}};
  return r;
}

// Waits up to 5 s for `done`.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(KeyDirectoryTest, StoreChangesReachTheRingWithinTheInterval) {
  char dir[] = "/tmp/fs-keydir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/meter.db";
  auto cli = OpenMeterStore(path);     // what `flashserve tenant` and `key` would use
  auto server = OpenMeterStore(path);  // what a worker uses
  ASSERT_TRUE(cli.ok() && server.ok());
  Tenant acme;
  acme.name = "acme";
  acme.cache_namespace = "shared-ns";
  acme.ttl_class = "agent";
  ASSERT_TRUE((*cli)->AddTenant(acme).ok());
  const std::string secret = NewSecretKey();
  const KeyRecord record{NewKeyId(), "acme", "", KeyDigest(secret), secret.substr(0, 8), 1, 0};
  ASSERT_TRUE((*cli)->AddKey(record).ok());

  auto ring = std::make_shared<ApiKeyRing>();
  auto flag_key = ParseApiKey("sk-static-key:ops");
  ASSERT_TRUE(flag_key.ok());
  auto directory = KeyDirectory::Start(server->get(), ring, {*flag_key}, 0.05);
  ASSERT_TRUE(directory.ok()) << directory.error().ToString();
  auto found = ring->Find(WithKey(secret));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, record.id);
  EXPECT_EQ(found->tenant, "acme");
  EXPECT_EQ(ApiKeyRing::Namespace(*found), "tenant:shared-ns");
  EXPECT_EQ(found->ttl_class, "agent");
  EXPECT_TRUE(ring->Find(WithKey("sk-static-key")).has_value());
  EXPECT_EQ((*directory)->Tenants()->count("acme"), 1u);

  // A new key works, a revoked one stops, within the interval.
  const std::string second = NewSecretKey();
  ASSERT_TRUE((*cli)->AddKey({NewKeyId(), "acme", "", KeyDigest(second), second.substr(0, 8), 2, 0}).ok());
  EXPECT_TRUE(Eventually([&] { return ring->Find(WithKey(second)).has_value(); }));
  ASSERT_TRUE((*cli)->RevokeKey(record.id, 3).ok());
  EXPECT_TRUE(Eventually([&] { return !ring->Find(WithKey(secret)).has_value(); }));
  // A removed tenant's keys stop; the static key stays, and keys are still required.
  ASSERT_TRUE((*cli)->RemoveTenant("acme", 4).ok());
  EXPECT_TRUE(Eventually([&] { return !ring->Find(WithKey(second)).has_value(); }));
  EXPECT_TRUE(ring->Find(WithKey("sk-static-key")).has_value());
  EXPECT_TRUE(ring->enabled());
  EXPECT_FALSE(ring->Allows(WithKey(secret)));
  const int64_t loads = (*directory)->loads();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ((*directory)->loads(), loads);  // nothing changed: nothing reloaded
  directory->reset();
  (void)std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(KeyDirectoryTest, EmptyStoreStillRequiresKeys) {
  char dir[] = "/tmp/fs-keydir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto store = OpenMeterStore(std::string(dir) + "/meter.db");
  ASSERT_TRUE(store.ok());
  auto ring = std::make_shared<ApiKeyRing>();
  auto directory = KeyDirectory::Start(store->get(), ring, {}, 1.0);
  ASSERT_TRUE(directory.ok());
  EXPECT_TRUE(ring->enabled());
  EXPECT_FALSE(ring->Allows(net::HttpRequest{}));
  directory->reset();
  (void)std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace flashserve::meter
