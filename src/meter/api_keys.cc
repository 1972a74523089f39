// API keys (meter/api_keys.h).
#include "meter/api_keys.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <strings.h>

#include <atomic>

#include "base/check.h"
#include "fmt/format.h"
#include "meter/tenant.h"

namespace flashserve::meter {

using base::Error;
using base::ErrorCode;

namespace {

std::string Hex(const unsigned char* data, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", data[i]);
  return out;
}

std::string RandomHex(size_t bytes) {
  unsigned char buf[32];
  FS_CHECK(bytes <= sizeof buf && RAND_bytes(buf, static_cast<int>(bytes)) == 1, "no random bytes for a key");
  return Hex(buf, bytes);
}

}  // namespace

std::string KeyDigest(std::string_view key) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  FS_CHECK(EVP_Digest(key.data(), key.size(), out, &len, EVP_sha256(), nullptr) == 1 && len == 32,
           "SHA-256 failed");
  return Hex(out, len);
}

std::string NewSecretKey() { return "fsk-" + RandomHex(20); }

std::string NewKeyId() { return "key_" + RandomHex(6); }

base::Result<ApiKey> ParseApiKey(std::string_view spec) {
  ApiKey key;
  const size_t first = spec.find(':');
  const std::string_view secret = spec.substr(0, first);
  if (secret.size() < 8 || secret.find_first_of(" \t\r\n") != std::string_view::npos)
    return Error(ErrorCode::kInvalidArgument, "an API key needs at least 8 characters and no spaces");
  key.digest = KeyDigest(secret);
  key.id = "static";  // numbered by the caller (ReadApiKeys): no part of the digest is ever shown
  if (first != std::string_view::npos) {
    std::string_view rest = spec.substr(first + 1);
    const size_t second = rest.find(':');
    key.tenant = std::string(rest.substr(0, second));
    if (!ValidName(key.tenant)) return Error(ErrorCode::kInvalidArgument, "API key tenant must match [A-Za-z0-9_.-]{1,64}");
    key.cache_namespace = key.tenant;
    if (second != std::string_view::npos) {
      key.ttl_class = std::string(rest.substr(second + 1));
      if (!ValidName(key.ttl_class)) return Error(ErrorCode::kInvalidArgument, "API key TTL class must match [A-Za-z0-9_.-]{1,64}");
    }
  }
  return key;
}

void ApiKeyRing::Replace(const std::vector<ApiKey>& keys) {
  auto map = std::make_shared<Map>();
  for (const ApiKey& k : keys) map->emplace(k.digest, k);
  std::atomic_store(&keys_, std::shared_ptr<const Map>(std::move(map)));
}

std::shared_ptr<const ApiKeyRing::Map> ApiKeyRing::Current() const { return std::atomic_load(&keys_); }

bool ApiKeyRing::enabled() const { return required_ || !Current()->empty(); }

std::optional<ApiKey> ApiKeyRing::Find(const net::HttpRequest& request) const {
  std::string presented = request.Header("x-api-key");
  const std::string auth = request.Header("authorization");
  if (auth.size() > 7 && strncasecmp(auth.c_str(), "bearer ", 7) == 0) presented = auth.substr(7);
  if (presented.empty()) return std::nullopt;
  const std::shared_ptr<const Map> keys = Current();
  if (keys->empty()) return std::nullopt;
  // Looked up by digest: the lookup's timing depends on the digest only, not on the key.
  auto it = keys->find(KeyDigest(presented));
  if (it == keys->end()) return std::nullopt;
  return it->second;
}

std::string ApiKeyRing::Namespace(const ApiKey& key) {
  return key.cache_namespace.empty() ? "key:" + key.digest : "tenant:" + key.cache_namespace;
}

}  // namespace flashserve::meter
