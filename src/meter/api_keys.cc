// API keys (meter/api_keys.h).
#include "meter/api_keys.h"

#include <strings.h>

#include <cctype>
#include <functional>

namespace flashserve::meter {

using base::Error;
using base::ErrorCode;

namespace {
bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}
}  // namespace

base::Result<ApiKey> ParseApiKey(std::string_view spec) {
  ApiKey key;
  const size_t first = spec.find(':');
  key.key = std::string(spec.substr(0, first));
  if (key.key.size() < 8 || key.key.find_first_of(" \t\r\n") != std::string::npos)
    return Error(ErrorCode::kInvalidArgument, "an API key needs at least 8 characters and no spaces");
  if (first != std::string_view::npos) {
    std::string_view rest = spec.substr(first + 1);
    const size_t second = rest.find(':');
    key.tenant = std::string(rest.substr(0, second));
    if (!ValidName(key.tenant)) return Error(ErrorCode::kInvalidArgument, "API key tenant must match [A-Za-z0-9_.-]{1,64}");
    if (second != std::string_view::npos) {
      key.ttl_class = std::string(rest.substr(second + 1));
      if (!ValidName(key.ttl_class)) return Error(ErrorCode::kInvalidArgument, "API key TTL class must match [A-Za-z0-9_.-]{1,64}");
    }
  }
  return key;
}

const ApiKey* ApiKeyRing::Find(const net::HttpRequest& request) const {
  std::string presented = request.Header("x-api-key");
  const std::string auth = request.Header("authorization");
  if (auth.size() > 7 && strncasecmp(auth.c_str(), "bearer ", 7) == 0) presented = auth.substr(7);
  if (presented.empty()) return nullptr;
  const ApiKey* found = nullptr;
  for (const ApiKey& k : keys_)  // no early exit: the time does not reveal which key matched
    if (ConstantTimeEqual(presented, k.key) && found == nullptr) found = &k;
  return found;
}

std::string ApiKeyRing::Namespace(const ApiKey& key) {
  return key.tenant.empty() ? "key:" + key.key.substr(0, 4) + "..." + std::to_string(std::hash<std::string>{}(key.key))
                            : "tenant:" + key.tenant;
}

}  // namespace flashserve::meter
