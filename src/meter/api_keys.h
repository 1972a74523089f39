// API keys: which clients may call the generation routes, and per key its id, tenant, cache
// namespace and default KV-store retention class. Keys are held and looked up by SHA-256
// digest only. The ring is shared by the worker's API and the router; Replace (the metering
// store's refresher) and Find (any I/O thread) may run concurrently.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/exchange.h"
#include "base/result.h"

namespace flashserve::meter {

struct ApiKey {
  std::string id;               // "key_..." (a store key) or "static_N" (the Nth key given by flags)
  std::string digest;           // hex SHA-256 of the key
  std::string tenant;           // "" = a key from a flag without a tenant
  std::string cache_namespace;  // what the prefix cache is salted with (ApiKeyRing::Namespace)
  std::string ttl_class;        // default retention class for this key's requests ("" = server default)
};

// Hex SHA-256 of a presented key.
std::string KeyDigest(std::string_view key);
// A new secret key: "fsk-" and 40 hex digits from the system's random source.
std::string NewSecretKey();
// A new key id: "key_" and 12 hex digits.
std::string NewKeyId();

// "KEY", "KEY:TENANT" or "KEY:TENANT:TTL_CLASS" (tenant and class: [A-Za-z0-9_.-]).
base::Result<ApiKey> ParseApiKey(std::string_view spec);

class ApiKeyRing {
 public:
  ApiKeyRing() = default;
  explicit ApiKeyRing(const std::vector<ApiKey>& keys) { Replace(keys); }
  // Swaps in a new set of keys (a later digest duplicate is ignored).
  void Replace(const std::vector<ApiKey>& keys);
  // Keys are required even while none is configured (a metering store with no keys yet).
  void Require() { required_ = true; }
  // Without keys (and not required) every request is allowed (a local development server).
  bool enabled() const;
  // The key presented as "Authorization: Bearer KEY" or "x-api-key: KEY"; none when no key
  // matches.
  std::optional<ApiKey> Find(const net::HttpRequest& request) const;
  // Whether a request may use a keyed route: no keys configured, or it presents one of them.
  bool Allows(const net::HttpRequest& request) const { return !enabled() || Find(request).has_value(); }
  // The cache namespace of a matched key: "tenant:" + its namespace, or "key:" + its digest.
  static std::string Namespace(const ApiKey& key);

 private:
  using Map = std::unordered_map<std::string, ApiKey>;  // by digest
  std::shared_ptr<const Map> Current() const;
  std::shared_ptr<const Map> keys_ = std::make_shared<Map>();  // guarded by atomic load/store
  bool required_ = false;  // set before serving starts
};

}  // namespace flashserve::meter
