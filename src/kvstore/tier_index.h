// TierIndex: what one tier holds (size, tokens, TTL class, expiry, recency, hits, pins, and for L1
// the payload), ordered by expiry (GC, expired-first eviction) and by value (capacity eviction).
// Used by KvStore for L1 and by DiskTier for L2/L3. Not thread-safe: the owner holds its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kvstore/kv_store.h"

namespace flashserve::kvstore {

// TTL class ids index StoreConfig::Classes(); kOtherClass marks a class found only on disk.
constexpr uint8_t kOtherClass = 255;

// Name <-> id of the configured TTL classes (at most 254). Immutable after construction.
class ClassTable {
 public:
  explicit ClassTable(std::vector<TtlClass> classes) : classes_(std::move(classes)) {}
  uint8_t Id(std::string_view name) const;  // kOtherClass when not configured
  const std::vector<TtlClass>& classes() const { return classes_; }

 private:
  std::vector<TtlClass> classes_;
};

struct IndexEntry {
  int64_t bytes = 0;
  int64_t tokens = 0;
  int64_t expiry = 0;    // Unix seconds; expired when now >= expiry
  int64_t last_use = 0;  // Unix seconds
  int64_t hits = 0;
  int32_t pins = 0;      // L1 only
  uint8_t ttl_class = 0;
  Payload payload;       // L1 only
};

class TierIndex {
 public:
  // Told of every object that appears (stored, with its expiry; also when a held object's expiry
  // changes) or disappears (removed) — the KV events the router follows. Called under the
  // owner's lock; must not call back into the index.
  using Observer = std::function<void(const ObjectKey& key, bool stored, int64_t expiry)>;
  void SetObserver(Observer observer) { observer_ = std::move(observer); }

  // Value used to order capacity eviction: recency plus a credit per hit (capped), so an object
  // used often survives one used once somewhat more recently.
  static int64_t Value(const IndexEntry& e);
  static constexpr int64_t kHitCreditSeconds = 600;
  static constexpr int64_t kMaxCreditedHits = 24;

  const IndexEntry* Find(const ObjectKey& key) const;
  // Inserts or replaces (keeping the old pin count when replacing).
  void Insert(const ObjectKey& key, IndexEntry entry);
  bool Erase(const ObjectKey& key, IndexEntry* erased = nullptr);
  // Sets last_use = now and adds `hits`.
  void Touch(const ObjectKey& key, int64_t now, int64_t hits);
  // Adds delta to the pin count (never below 0); pinned entries are never victims.
  void AddPins(const ObjectKey& key, int32_t delta);
  void SetExpiry(const ObjectKey& key, int64_t expiry);

  // The next capacity victim: an expired unpinned entry (earliest expiry) if any, else the
  // unpinned entry of least Value. skip(key) excludes keys (e.g. being written). False if none.
  bool PickVictim(int64_t now, const std::function<bool(const ObjectKey&)>& skip, ObjectKey* victim) const;
  // Up to max expired unpinned entries, earliest expiry first, not excluded by skip.
  std::vector<ObjectKey> Expired(int64_t now, size_t max, const std::function<bool(const ObjectKey&)>& skip) const;
  // Expired entries not yet removed.
  int64_t CountExpired(int64_t now) const;
  // What it holds at `now` into a tier's statistics: objects, bytes, pinned, gc_backlog.
  void FillSizes(int64_t now, TierStats* stats) const;
  // Adds its objects and bytes per class to column `tier` of *classes (configured classes in
  // id order, then "other").
  void AddClassStats(Tier tier, std::vector<ClassStats>* classes) const;

  std::vector<ObjectKey> Keys() const;
  void ForEach(const std::function<void(const ObjectKey&, const IndexEntry&)>& fn) const;
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  int64_t bytes() const { return bytes_; }
  int64_t pinned() const { return pinned_; }
  int64_t class_objects(uint8_t c) const { return class_objects_[c]; }
  int64_t class_bytes(uint8_t c) const { return class_bytes_[c]; }
  void Clear();

 private:
  using Order = std::set<std::pair<int64_t, ObjectKey>>;
  void Link(const ObjectKey& key, const IndexEntry& e);
  void Unlink(const ObjectKey& key, const IndexEntry& e);

  std::unordered_map<ObjectKey, IndexEntry, ObjectKeyHasher> entries_;
  Observer observer_;
  Order by_expiry_;
  Order by_value_;  // unpinned entries only
  int64_t bytes_ = 0;
  int64_t pinned_ = 0;
  int64_t class_objects_[256] = {};
  int64_t class_bytes_[256] = {};
};

}  // namespace flashserve::kvstore
