// StoreTier: what every tier of the KV store (L1 MemoryTier, L2/L3 DiskTier) answers the same
// way, so KvStore's lookups, pins, statistics, snapshots and GC are loops over its tiers.
// Implementations are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "kvstore/io_pool.h"
#include "kvstore/kv_store.h"

namespace flashserve::kvstore {

class StoreTier {
 public:
  virtual ~StoreTier() = default;
  virtual Tier tier() const = 0;
  // Indexed and unexpired at `now` (no I/O).
  virtual bool Holds(const ObjectKey& key, int64_t now) const = 0;
  // Marks a use: recency and one hit (eviction keeps used objects longer).
  virtual void Touch(const ObjectKey& key, int64_t now) = 0;
  // Deletes expired objects (disk deletes paced by `limiter`), stopping early when *cancel;
  // returns how many went.
  virtual int64_t CollectExpired(RateLimiter& limiter, const std::atomic<bool>* cancel) = 0;
  virtual TierStats Stats() const = 0;
  // Adds this tier's objects and bytes per TTL class (configured classes, then "other").
  virtual void AddClassStats(std::vector<ClassStats>* classes) const = 0;
  // Calls fn for every indexed, unexpired object (under the tier's lock: fn must be quick).
  virtual void ForEachObject(int64_t now, const std::function<void(const ObjectKey&, int64_t expiry)>& fn) const = 0;
};

}  // namespace flashserve::kvstore
