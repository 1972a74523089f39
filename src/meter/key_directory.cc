// The store-backed key ring refresher (meter/key_directory.h).
#include "meter/key_directory.h"

#include <chrono>

#include "base/log.h"

namespace flashserve::meter {

base::Result<std::unique_ptr<KeyDirectory>> KeyDirectory::Start(MeterStore* store, std::shared_ptr<ApiKeyRing> ring,
                                                                 std::vector<ApiKey> static_keys, double interval_s) {
  std::unique_ptr<KeyDirectory> dir(new KeyDirectory(store, std::move(ring), std::move(static_keys), interval_s));
  FS_ASSIGN_OR_RETURN(int64_t generation, store->Generation());
  FS_RETURN_IF_ERROR(dir->Load(generation));
  dir->thread_ = std::thread([d = dir.get()] { d->Poll(); });
  return dir;
}

KeyDirectory::KeyDirectory(MeterStore* store, std::shared_ptr<ApiKeyRing> ring, std::vector<ApiKey> static_keys,
                           double interval_s)
    : store_(store), ring_(std::move(ring)), static_keys_(std::move(static_keys)), interval_s_(interval_s) {
  ring_->Require();
}

KeyDirectory::~KeyDirectory() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const KeyDirectory::TenantMap> KeyDirectory::Tenants() const {
  std::lock_guard lock(mu_);
  return tenants_;
}

int64_t KeyDirectory::loads() const {
  std::lock_guard lock(mu_);
  return loads_;
}

base::Status KeyDirectory::Load(int64_t generation) {
  FS_ASSIGN_OR_RETURN(std::vector<Tenant> tenants, store_->ListTenants());
  FS_ASSIGN_OR_RETURN(std::vector<KeyRecord> records, store_->ListKeys(""));
  auto map = std::make_shared<TenantMap>();
  for (Tenant& t : tenants) map->emplace(t.name, std::move(t));
  std::vector<ApiKey> keys = static_keys_;
  for (const KeyRecord& r : records) {
    auto tenant = map->find(r.tenant);
    if (r.revoked != 0 || tenant == map->end()) continue;
    keys.push_back(ApiKey{r.id, r.digest, r.tenant, tenant->second.cache_namespace, tenant->second.ttl_class});
  }
  ring_->Replace(keys);
  std::lock_guard lock(mu_);
  tenants_ = std::move(map);
  generation_ = generation;
  ++loads_;
  return base::Status::Ok();
}

void KeyDirectory::Poll() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return stop_; })) {
    const int64_t seen = generation_;
    lock.unlock();
    base::Result<int64_t> generation = store_->Generation();
    base::Status status = generation.ok() ? base::Status::Ok() : base::Status(generation.error());
    if (status.ok() && *generation != seen) status = Load(*generation);
    if (!status.ok()) FS_LOG(kWarning, "metering store: keeping the last keys: {}", status.ToString());
    lock.lock();
  }
}

}  // namespace flashserve::meter
