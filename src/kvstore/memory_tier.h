// MemoryTier: L1 of the KV store, the payloads themselves in host DRAM under a byte budget, with
// pins (a pinned object is never evicted), expired-first then least-valuable eviction, and hit /
// miss counters. Thread-safe (one mutex); the engine thread reads it, I/O threads insert.
#pragma once

#include <cstdint>
#include <mutex>

#include "base/clock.h"
#include "kvstore/store_tier.h"
#include "kvstore/tier_index.h"

namespace flashserve::kvstore {

class MemoryTier final : public StoreTier {
 public:
  MemoryTier(int64_t capacity_bytes, const base::Clock& clock);

  // KV events: see TierIndex::Observer.
  void SetObserver(TierIndex::Observer observer);
  // Inserts (or, for a held key, extends its expiry and touches it), evicting to fit; pins it
  // once when `pin`. False when it cannot fit (too big, or everything else is pinned).
  bool Insert(const ObjectKey& key, Payload payload, int64_t tokens, int64_t expiry, uint8_t class_id, bool pin);
  // The payload, or null when absent or expired: counted as a hit, or a miss where count_miss.
  Payload Get(const ObjectKey& key, bool count_miss);
  // Whether it holds key unexpired; touched (no hit counted), and pinned once when `pin`.
  bool FindAndTouch(const ObjectKey& key, bool pin);
  // Pins a held key once (expired or not: its reader already decided); false when absent.
  bool Pin(const ObjectKey& key);
  void Unpin(const ObjectKey& key);  // releases one pin

  Tier tier() const override { return Tier::kMemory; }
  bool Holds(const ObjectKey& key, int64_t now) const override;
  void Touch(const ObjectKey& key, int64_t now) override;
  int64_t CollectExpired(RateLimiter& limiter, const std::atomic<bool>* cancel) override;
  TierStats Stats() const override;
  void AddClassStats(std::vector<ClassStats>* classes) const override;
  void ForEachObject(int64_t now, const std::function<void(const ObjectKey&, int64_t expiry)>& fn) const override;

 private:
  const int64_t capacity_;
  const base::Clock& clock_;
  mutable std::mutex mu_;
  TierIndex index_;
  TierStats stats_;  // counters; sizes come from index_
};

}  // namespace flashserve::kvstore
