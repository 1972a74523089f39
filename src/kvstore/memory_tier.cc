// MemoryTier (kvstore/memory_tier.h).
#include "kvstore/memory_tier.h"

#include <utility>
#include <vector>

namespace flashserve::kvstore {

MemoryTier::MemoryTier(int64_t capacity_bytes, const base::Clock& clock) : capacity_(capacity_bytes), clock_(clock) {
  stats_.capacity = capacity_bytes;
}

void MemoryTier::SetObserver(TierIndex::Observer observer) {
  std::lock_guard<std::mutex> lock(mu_);
  index_.SetObserver(std::move(observer));
}

bool MemoryTier::Insert(const ObjectKey& key, Payload payload, int64_t tokens, int64_t expiry, uint8_t class_id,
                        bool pin) {
  const int64_t now = clock_.NowUnixSeconds();
  const int64_t size = static_cast<int64_t>(payload->size());
  std::vector<Payload> evicted;  // released after the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (const IndexEntry* e = index_.Find(key)) {
    if (expiry > e->expiry) index_.SetExpiry(key, expiry);
    index_.Touch(key, now, 0);
    if (pin) index_.AddPins(key, 1);
    return true;
  }
  if (size > capacity_) return false;
  while (index_.bytes() + size > capacity_) {
    ObjectKey victim;
    if (!index_.PickVictim(now, nullptr, &victim)) return false;  // everything left is pinned
    IndexEntry erased;
    index_.Erase(victim, &erased);
    ++(now >= erased.expiry ? stats_.expirations : stats_.evictions);
    evicted.push_back(std::move(erased.payload));
  }
  IndexEntry entry;
  entry.bytes = size;
  entry.tokens = tokens;
  entry.expiry = expiry;
  entry.last_use = now;
  entry.ttl_class = class_id;
  entry.pins = pin ? 1 : 0;
  entry.payload = std::move(payload);
  index_.Insert(key, std::move(entry));
  stats_.bytes_written += size;
  return true;
}

Payload MemoryTier::Get(const ObjectKey& key, bool count_miss) {
  const int64_t now = clock_.NowUnixSeconds();
  std::lock_guard<std::mutex> lock(mu_);
  const IndexEntry* e = index_.Find(key);
  if (e == nullptr || now >= e->expiry) {
    if (count_miss) ++stats_.misses;
    return nullptr;
  }
  Payload payload = e->payload;
  index_.Touch(key, now, 0);
  ++stats_.hits;
  stats_.bytes_read += static_cast<int64_t>(payload->size());
  return payload;
}

bool MemoryTier::FindAndTouch(const ObjectKey& key, bool pin) {
  const int64_t now = clock_.NowUnixSeconds();
  std::lock_guard<std::mutex> lock(mu_);
  const IndexEntry* e = index_.Find(key);
  if (e == nullptr || now >= e->expiry) return false;
  index_.Touch(key, now, 0);
  if (pin) index_.AddPins(key, 1);
  return true;
}

bool MemoryTier::Pin(const ObjectKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.Find(key) == nullptr) return false;
  index_.AddPins(key, 1);
  return true;
}

void MemoryTier::Unpin(const ObjectKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  index_.AddPins(key, -1);
}

bool MemoryTier::Holds(const ObjectKey& key, int64_t now) const {
  std::lock_guard<std::mutex> lock(mu_);
  const IndexEntry* e = index_.Find(key);
  return e != nullptr && now < e->expiry;
}

void MemoryTier::Touch(const ObjectKey& key, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.Find(key) != nullptr) index_.Touch(key, now, 1);
}

int64_t MemoryTier::CollectExpired(RateLimiter&, const std::atomic<bool>*) {
  const int64_t now = clock_.NowUnixSeconds();
  std::vector<Payload> dropped;  // released after the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (const ObjectKey& key : index_.Expired(now, SIZE_MAX, nullptr)) {
    IndexEntry erased;
    index_.Erase(key, &erased);
    dropped.push_back(std::move(erased.payload));
    ++stats_.expirations;
  }
  return static_cast<int64_t>(dropped.size());
}

TierStats MemoryTier::Stats() const {
  const int64_t now = clock_.NowUnixSeconds();
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = stats_;
  index_.FillSizes(now, &s);
  return s;
}

void MemoryTier::AddClassStats(std::vector<ClassStats>* classes) const {
  std::lock_guard<std::mutex> lock(mu_);
  index_.AddClassStats(Tier::kMemory, classes);
}

void MemoryTier::ForEachObject(int64_t now, const std::function<void(const ObjectKey&, int64_t)>& fn) const {
  std::lock_guard<std::mutex> lock(mu_);
  index_.ForEach([&](const ObjectKey& key, const IndexEntry& e) {
    if (now < e.expiry) fn(key, e.expiry);
  });
}

}  // namespace flashserve::kvstore
