// Keeps an ApiKeyRing, and the tenants behind its keys, in step with the metering store: loads
// once at start, then a thread of its own polls the store's generation and reloads on a
// change, so keys created or revoked reach running workers and routers within one interval.
// A failed reload keeps the last good keys (logged). Tenants() may be called from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "meter/api_keys.h"
#include "meter/store.h"

namespace flashserve::meter {

class KeyDirectory {
 public:
  using TenantMap = std::map<std::string, Tenant>;

  // Loads once (an unreadable store is an error) and starts polling every interval_s. The ring
  // then holds `static_keys` (from flags) and the store's active keys, and always requires one.
  // `store` and `ring` must outlive the directory.
  static base::Result<std::unique_ptr<KeyDirectory>> Start(MeterStore* store, std::shared_ptr<ApiKeyRing> ring,
                                                           std::vector<ApiKey> static_keys, double interval_s);
  ~KeyDirectory();  // stops and joins the thread
  KeyDirectory(const KeyDirectory&) = delete;
  KeyDirectory& operator=(const KeyDirectory&) = delete;

  std::shared_ptr<const TenantMap> Tenants() const;
  int64_t loads() const;  // successful loads so far (the first included)

 private:
  KeyDirectory(MeterStore* store, std::shared_ptr<ApiKeyRing> ring, std::vector<ApiKey> static_keys, double interval_s);
  base::Status Load(int64_t generation);
  void Poll();

  MeterStore* store_;
  std::shared_ptr<ApiKeyRing> ring_;
  const std::vector<ApiKey> static_keys_;
  const double interval_s_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::shared_ptr<const TenantMap> tenants_;
  int64_t generation_ = -1;
  int64_t loads_ = 0;
  std::thread thread_;
};

}  // namespace flashserve::meter
