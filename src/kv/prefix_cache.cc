// Prefix cache (kv/prefix_cache.h).
#include "kv/prefix_cache.h"

namespace flashserve::kv {

const PrefixCache::Entry* PrefixCache::Touch(const Key& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return &it->second;
}

PrefixMatch PrefixCache::Lookup(std::span<const BlockHash> hashes) {
  ++stats_.lookups;
  PrefixMatch best;
  std::vector<Payload> blocks;
  for (size_t k = 0; k < hashes.size(); ++k) {
    const Entry* block = Touch(Key{hashes[k], false});
    if (block == nullptr) break;
    blocks.push_back(block->payload);
    if (const Entry* boundary = Touch(Key{hashes[k], true})) {
      best.num_blocks = static_cast<int64_t>(k) + 1;
      best.boundary = boundary->payload;
      best.blocks = blocks;
    }
  }
  if (best.num_blocks > 0) {
    ++stats_.hits;
    stats_.hit_blocks += best.num_blocks;
  }
  return best;
}

bool PrefixCache::HasBlock(const BlockHash& hash) const { return index_.count(Key{hash, false}) > 0; }
bool PrefixCache::HasBoundary(const BlockHash& hash) const { return index_.count(Key{hash, true}) > 0; }

void PrefixCache::PutBlock(const BlockHash& hash, Payload payload) { Put(Key{hash, false}, std::move(payload)); }
void PrefixCache::PutBoundary(const BlockHash& hash, Payload payload) { Put(Key{hash, true}, std::move(payload)); }

void PrefixCache::Put(const Key& key, Payload payload) {
  const int64_t size = static_cast<int64_t>(payload->size());
  if (size > capacity_) return;  // never fits
  auto it = index_.find(key);
  if (it != index_.end()) {
    bytes_ += size - static_cast<int64_t>(it->second.payload->size());
    it->second.payload = std::move(payload);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  } else {
    lru_.push_front(key);
    index_.emplace(key, Entry{std::move(payload), lru_.begin()});
    bytes_ += size;
    ++stats_.inserts;
  }
  EvictToBudget();
}

void PrefixCache::EvictToBudget() {
  while (bytes_ > capacity_ && !lru_.empty()) {
    auto it = index_.find(lru_.back());
    bytes_ -= static_cast<int64_t>(it->second.payload->size());
    index_.erase(it);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

void PrefixCache::Clear() {
  index_.clear();
  lru_.clear();
  bytes_ = 0;
}

}  // namespace flashserve::kv
