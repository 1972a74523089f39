// In-memory prefix cache (design.md section 4): block payloads keyed by their chained hash and
// boundary snapshots keyed by the hash of the last block before them (a boundary at 128 k is
// stored under H_{k-1}). Payloads are immutable opaque bytes (the engine's storage format)
// shared by pointer, so a sequence that restored from a payload keeps it valid even if the
// cache evicts it. LRU eviction within a byte budget. Engine thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace flashserve::kv {

using Payload = std::shared_ptr<const std::string>;

struct PrefixMatch {
  int64_t num_blocks = 0;        // 0 = no usable prefix
  std::vector<Payload> blocks;   // blocks 0 .. num_blocks - 1
  Payload boundary;              // snapshot at 128 * num_blocks
};

struct PrefixCacheStats {
  int64_t lookups = 0, hits = 0, hit_blocks = 0, evictions = 0, inserts = 0;
};

class PrefixCache {
 public:
  explicit PrefixCache(int64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The longest k <= hashes.size() with blocks 0..k-1 present and a boundary at k.
  PrefixMatch Lookup(std::span<const BlockHash> hashes);
  bool HasBlock(const BlockHash& hash) const;
  bool HasBoundary(const BlockHash& hash) const;
  // Inserts (or refreshes) and evicts least recently used entries beyond the budget.
  void PutBlock(const BlockHash& hash, Payload payload);
  void PutBoundary(const BlockHash& hash, Payload payload);
  void Clear();

  int64_t bytes() const { return bytes_; }
  int64_t capacity() const { return capacity_; }
  size_t num_entries() const { return index_.size(); }
  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Key {
    BlockHash hash;
    bool boundary;
    bool operator==(const Key& o) const { return boundary == o.boundary && hash == o.hash; }
  };
  struct KeyHasher {
    size_t operator()(const Key& k) const { return BlockHashHasher()(k.hash) ^ (k.boundary ? 0x9E3779B97F4A7C15ull : 0); }
  };
  struct Entry {
    Payload payload;
    std::list<Key>::iterator lru;
  };
  void Put(const Key& key, Payload payload);
  const Entry* Touch(const Key& key);
  void EvictToBudget();

  int64_t capacity_;
  int64_t bytes_ = 0;
  std::list<Key> lru_;  // front = most recent
  std::unordered_map<Key, Entry, KeyHasher> index_;
  PrefixCacheStats stats_;
};

}  // namespace flashserve::kv
