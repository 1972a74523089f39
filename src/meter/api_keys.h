// API keys: which clients may call the generation routes, and per key the tenant (its
// prefix-cache namespace: tenants never share cached prefixes unless given the same tenant)
// and the default KV-store retention class. Used by the worker's API and the router alike.
// Built once at start-up, then read-only; Find is safe from any I/O thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "net/exchange.h"
#include "base/result.h"

namespace flashserve::meter {

struct ApiKey {
  std::string key;
  std::string tenant;     // cache namespace; "" = the key itself stands for its tenant
  std::string ttl_class;  // default retention class for this key's requests ("" = server default)
};

// "KEY", "KEY:TENANT" or "KEY:TENANT:TTL_CLASS" (tenant and class: [A-Za-z0-9_.-]).
base::Result<ApiKey> ParseApiKey(std::string_view spec);

class ApiKeyRing {
 public:
  ApiKeyRing() = default;
  explicit ApiKeyRing(std::vector<ApiKey> keys) : keys_(std::move(keys)) {}
  // Without keys every request is allowed (a local development server).
  bool enabled() const { return !keys_.empty(); }
  // The key presented as "Authorization: Bearer KEY" or "x-api-key: KEY"; null when none
  // matches (compared in constant time per key).
  const ApiKey* Find(const net::HttpRequest& request) const;
  // Whether a request may use a keyed route: no keys configured, or it presents one of them.
  bool Allows(const net::HttpRequest& request) const { return !enabled() || Find(request) != nullptr; }
  // The cache namespace of a matched key.
  static std::string Namespace(const ApiKey& key);

 private:
  std::vector<ApiKey> keys_;
};

}  // namespace flashserve::meter
