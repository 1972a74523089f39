// API keys: specs, matching by header, tenants as cache namespaces (meter/api_keys.h).
#include "meter/api_keys.h"

#include <gtest/gtest.h>

namespace flashserve::meter {
namespace {

TEST(ApiKeysTest, ParsesSpecsAndMatchesBearerOrHeader) {
  auto plain = ParseApiKey("sk-abcdefgh");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->tenant, "");
  auto full = ParseApiKey("sk-12345678:acme:agent");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->tenant, "acme");
  EXPECT_EQ(full->ttl_class, "agent");
  EXPECT_FALSE(ParseApiKey("short").ok());
  EXPECT_FALSE(ParseApiKey("sk-12345678:bad tenant").ok());
  EXPECT_FALSE(ParseApiKey("sk-12345678:acme:").ok());
  ApiKeyRing ring({*plain, *full});
  net::HttpRequest r;
  EXPECT_FALSE(ring.Find(r).has_value());
  r.headers = {{"Authorization", "Bearer sk-12345678"}};
  ASSERT_TRUE(ring.Find(r).has_value());
  EXPECT_EQ(ring.Find(r)->tenant, "acme");
  r.headers = {{"x-api-key", "sk-abcdefgh"}};
  ASSERT_TRUE(ring.Find(r).has_value());
  r.headers = {{"Authorization", "Bearer sk-abcdefgX"}};
  EXPECT_FALSE(ring.Find(r).has_value());
  // Tenants are cache namespaces: different tenants never share one, a key without a tenant
  // gets its own.
  EXPECT_EQ(ApiKeyRing::Namespace(*full), "tenant:acme");
  EXPECT_NE(ApiKeyRing::Namespace(*plain), ApiKeyRing::Namespace(*full));
  EXPECT_FALSE(ApiKeyRing().enabled());
  EXPECT_TRUE(ApiKeyRing().Allows(r));  // no keys: a development server
  EXPECT_FALSE(ring.Allows(r));         // the last request presented a wrong key
  r.headers = {{"x-api-key", "sk-abcdefgh"}};
  EXPECT_TRUE(ring.Allows(r));
}

}  // namespace
}  // namespace flashserve::meter
