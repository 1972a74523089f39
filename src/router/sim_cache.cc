// LruCache and WorkerCache (router/sim_cache.h).
#include "router/sim_cache.h"

#include "base/check.h"

namespace flashserve::router {

LruCache::LruCache(int64_t capacity_units) : capacity_(capacity_units) {
  nodes_.push_back(Node{0, 0, 0, 0});  // sentinel: next = most recent, prev = least recent
}

void LruCache::Unlink(uint32_t n) {
  nodes_[nodes_[n].prev].next = nodes_[n].next;
  nodes_[nodes_[n].next].prev = nodes_[n].prev;
}

void LruCache::PushFront(uint32_t n) {
  nodes_[n].prev = 0;
  nodes_[n].next = nodes_[0].next;
  nodes_[nodes_[0].next].prev = n;
  nodes_[0].next = n;
}

void LruCache::Touch(uint32_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  Unlink(it->second);
  PushFront(it->second);
}

bool LruCache::Insert(uint32_t key, int32_t units, std::vector<uint32_t>* evicted) {
  if (units > capacity_) return false;
  auto it = index_.find(key);
  if (it != index_.end()) {
    Unlink(it->second);
    PushFront(it->second);
    return false;
  }
  while (used_ + units > capacity_) {
    const uint32_t victim = nodes_[0].prev;
    FS_CHECK(victim != 0, "LRU accounting broken");
    Unlink(victim);
    used_ -= nodes_[victim].units;
    index_.erase(nodes_[victim].key);
    evicted->push_back(nodes_[victim].key);
    free_.push_back(victim);
  }
  uint32_t n;
  if (!free_.empty()) {
    n = free_.back();
    free_.pop_back();
  } else {
    n = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(Node{});
  }
  nodes_[n].key = key;
  nodes_[n].units = units;
  PushFront(n);
  used_ += units;
  index_.emplace(key, n);
  return true;
}

WorkerCache::WorkerCache(int64_t memory_units, int64_t disk_units, int32_t boundary_units)
    : memory_(memory_units), disk_(disk_units), boundary_units_(boundary_units) {}

kv::ResumePoint WorkerCache::Lookup(std::span<const uint32_t> blocks) const {
  return kv::LongestResumePoint(static_cast<int64_t>(blocks.size()), [&](ObjectKind kind, int64_t i) {
    const uint32_t key = Key(blocks[static_cast<size_t>(i)], kind);
    if (memory_.Contains(key)) return std::optional<Tier>(Tier::kMemory);
    if (disk_.Contains(key)) return std::optional<Tier>(Tier::kDisk);
    return std::optional<Tier>();
  });
}

void WorkerCache::Put(LruCache& tier, Tier tier_id, uint32_t block, ObjectKind kind, std::vector<SimEvent>* events) {
  evicted_.clear();
  const bool inserted = tier.Insert(Key(block, kind), Units(kind), &evicted_);
  for (uint32_t key : evicted_) {
    events->push_back(SimEvent{false, tier_id, (key & 1) ? ObjectKind::kBoundary : ObjectKind::kBlock, key / 2});
  }
  if (inserted) events->push_back(SimEvent{true, tier_id, kind, block});
}

void WorkerCache::ReadOne(uint32_t block, ObjectKind kind, std::vector<SimEvent>* events) {
  const uint32_t key = Key(block, kind);
  disk_.Touch(key);
  if (memory_.Contains(key)) {
    memory_.Touch(key);
  } else {
    Put(memory_, Tier::kMemory, block, kind, events);
  }
}

void WorkerCache::Read(std::span<const uint32_t> blocks, const kv::ResumePoint& lookup,
                       std::vector<SimEvent>* events) {
  if (lookup.blocks == 0) return;
  for (int64_t i = 0; i < lookup.blocks; ++i) ReadOne(blocks[i], ObjectKind::kBlock, events);
  ReadOne(blocks[lookup.blocks - 1], ObjectKind::kBoundary, events);
}

void WorkerCache::Store(std::span<const uint32_t> blocks, std::span<const int64_t> boundaries_after,
                        std::vector<SimEvent>* events) {
  for (uint32_t b : blocks) {
    Put(disk_, Tier::kDisk, b, ObjectKind::kBlock, events);
    Put(memory_, Tier::kMemory, b, ObjectKind::kBlock, events);
  }
  for (int64_t i : boundaries_after) {
    Put(disk_, Tier::kDisk, blocks[i], ObjectKind::kBoundary, events);
    Put(memory_, Tier::kMemory, blocks[i], ObjectKind::kBoundary, events);
  }
}

}  // namespace flashserve::router
