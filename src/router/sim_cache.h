// The route simulator's model of one worker's prefix cache: an LRU memory tier over an LRU disk
// tier (write-through), holding blocks and boundaries by dense block number, reporting every
// change as a KV event. Used only by route_sim.cc; single-threaded.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "router/prefix_index.h"

namespace flashserve::router {

// LRU over uint32 keys with a size in units per key; capacity 0 holds nothing.
class LruCache {
 public:
  explicit LruCache(int64_t capacity_units);
  bool Contains(uint32_t key) const { return index_.count(key) != 0; }
  void Touch(uint32_t key);
  // Inserts key (or touches it if present; returns false then), evicting least recent keys until
  // it fits; evicted keys are appended to *evicted.
  bool Insert(uint32_t key, int32_t units, std::vector<uint32_t>* evicted);
  int64_t used_units() const { return used_; }

 private:
  struct Node {
    uint32_t key;
    int32_t units;
    uint32_t prev, next;
  };
  void Unlink(uint32_t n);
  void PushFront(uint32_t n);

  int64_t capacity_;
  int64_t used_ = 0;
  std::vector<Node> nodes_;  // node 0 is the list sentinel
  std::vector<uint32_t> free_;
  std::unordered_map<uint32_t, uint32_t> index_;
};

// A KV event before hashing: object = dense block number (kind in the top of the event).
struct SimEvent {
  bool stored;
  Tier tier;
  ObjectKind kind;
  uint32_t block;
};

class WorkerCache {
 public:
  // Capacities in block units; a boundary takes boundary_units.
  WorkerCache(int64_t memory_units, int64_t disk_units, int32_t boundary_units);

  // What this worker can resume of a prompt's blocks (at most kv::MaxResumeBlocks of them):
  // kv::LongestResumePoint over its memory and disk tiers.
  kv::ResumePoint Lookup(std::span<const uint32_t> blocks) const;
  // Reads the looked-up prefix: disk-only objects are copied into memory; all are touched.
  void Read(std::span<const uint32_t> blocks, const kv::ResumePoint& lookup, std::vector<SimEvent>* events);
  // Stores blocks [0, n) and the boundaries after the given block indices, in both tiers.
  void Store(std::span<const uint32_t> blocks, std::span<const int64_t> boundaries_after,
             std::vector<SimEvent>* events);

 private:
  static uint32_t Key(uint32_t block, ObjectKind kind) {
    return block * 2 + (kind == ObjectKind::kBoundary ? 1 : 0);
  }
  int32_t Units(ObjectKind kind) const { return kind == ObjectKind::kBoundary ? boundary_units_ : 1; }
  void Put(LruCache& tier, Tier tier_id, uint32_t block, ObjectKind kind, std::vector<SimEvent>* events);
  void ReadOne(uint32_t block, ObjectKind kind, std::vector<SimEvent>* events);

  LruCache memory_, disk_;
  int32_t boundary_units_;
  std::vector<uint32_t> evicted_;
};

}  // namespace flashserve::router
