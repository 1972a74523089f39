// PrefixIndex: which KV objects (blocks, boundary snapshots; per tier) every worker can read, fed by
// the workers' KV events, and for a prompt the resumable cached prefix on every worker (Match).
// Called by the router's routing thread and the route simulator. Not thread-safe: one owner thread.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "kv/block_hash.h"
#include "kv/resume.h"
#include "protocol/cluster.h"

namespace flashserve::router {

// The prefix cache's vocabulary (kv/resume.h) and the workers' KV events (protocol/cluster.h).
using kv::kNumTiers;
using kv::ObjectKind;
using kv::Tier;
inline const char* TierName(Tier tier) { return protocol::KvTierName(tier); }  // "memory", "disk", "shared"
// One object a worker holds (a snapshot entry; expiry_unix is not used here).
using protocol::KvObject;
// One change on one worker. seq is the worker's event sequence number (1, 2, ...; 0 = unsequenced):
// a seq at or below the last applied one is a duplicate and ignored; a jump marks a gap (the
// event still applies, and NeedsResync() is true until Reset).
using protocol::KvEvent;

// What one worker can resume of a prompt: kv's rule (LongestResumePoint) applied to the objects
// that worker can read, each block counted in the best tier it reads it from (memory > disk >
// shared).
struct WorkerMatch : kv::ResumePoint {
  bool live = false;  // false for a removed worker id (then blocks = 0)
};

struct PrefixIndexStats {
  int64_t workers = 0;          // live workers
  int64_t hashes = 0;           // distinct hashes with any holder
  int64_t private_entries = 0;  // (worker, kind, hash) held in memory and/or disk
  int64_t shared_entries = 0;   // (kind, hash) in the shared tier
  int64_t events = 0, duplicates = 0, gaps = 0, evicted = 0;
};

class PrefixIndex {
 public:
  // max_entries_per_worker > 0 caps each worker's private entries; beyond it the oldest stored
  // entry of that worker is dropped (the router then underestimates that worker's cache).
  explicit PrefixIndex(int64_t max_entries_per_worker = 0);

  // A new worker id (never reused); it holds nothing until events or a Reset arrive.
  int AddWorker();
  // Forgets the worker's private entries; its id stays retired. Shared entries remain.
  base::Status RemoveWorker(int worker);
  // Shared-tier events from any worker update the one shared set every worker reads.
  base::Status Apply(int worker, const KvEvent& event);
  // Replaces the worker's private contents with `snapshot` (resync after a gap or a restart);
  // shared objects in it are added to the shared set. seq = the last event the snapshot covers.
  base::Status Reset(int worker, std::span<const KvObject> snapshot, uint64_t seq = 0);

  // For every worker id (out->size() == num_slots()), its resumable prefix of prompt_blocks
  // (pass at most kv::MaxResumeBlocks(prompt tokens) of them): equal, worker by worker, to
  // kv::LongestResumePoint over that worker's objects (a test checks it), computed for all
  // workers in one walk. Cost: one lookup per prompt block until nobody matches, plus the
  // holders of matched blocks.
  void Match(std::span<const kv::BlockHash> prompt_blocks, std::vector<WorkerMatch>* out) const;

  int num_slots() const { return static_cast<int>(workers_.size()); }
  bool live(int worker) const { return ValidWorker(worker); }
  bool NeedsResync(int worker) const { return ValidWorker(worker) && workers_[worker].needs_resync; }
  PrefixIndexStats stats() const;

 private:
  struct Holder {
    int32_t worker;
    uint32_t stamp;  // per-worker insertion number (identifies this insertion in the FIFO)
    uint8_t tiers;   // bit 0 memory, bit 1 disk
  };
  struct Entry {
    kv::BlockHash hash{};
    std::vector<Holder> holders[2];  // [0] block, [1] boundary
    uint8_t shared = 0;              // bit 1 block, bit 2 boundary
    bool used = false;
  };
  struct FifoItem {
    uint32_t slot;
    uint32_t stamp;
    ObjectKind kind;
  };
  struct WorkerState {
    bool live = false;
    bool needs_resync = false;
    uint64_t last_seq = 0;
    uint32_t next_stamp = 1;
    int64_t entries = 0;
    std::deque<FifoItem> fifo;  // private insertions, oldest first (some stale)
  };
  struct Work {  // Match scratch, per worker
    int32_t run = 0;  // consecutive readable blocks (phase 2 only)
    int32_t mem = 0, disk = 0;
  };
  class MatchWalk;

  bool ValidWorker(int worker) const;
  uint32_t SlotFor(const kv::BlockHash& hash);  // finds or creates
  const Entry* Find(const kv::BlockHash& hash) const;
  void MaybeFree(uint32_t slot);
  void Store(int worker, ObjectKind kind, uint8_t tier_bit, const kv::BlockHash& hash);
  void Remove(int worker, ObjectKind kind, uint8_t tier_bit, const kv::BlockHash& hash);
  void SetShared(ObjectKind kind, bool stored, const kv::BlockHash& hash);
  // Drops the holder of (slot, kind) for worker if its stamp matches (0 = any). True if dropped.
  bool DropHolder(int worker, uint32_t slot, ObjectKind kind, uint32_t stamp);
  void ClearPrivate(int worker);
  void EnforceCap(int worker);
  void CompactFifo(int worker);

  int64_t max_entries_per_worker_;
  std::vector<WorkerState> workers_;
  std::unordered_map<kv::BlockHash, uint32_t, kv::BlockHashHasher> slot_of_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_slots_;
  int64_t shared_entries_ = 0, private_entries_ = 0;
  int64_t events_ = 0, duplicates_ = 0, gaps_ = 0, evicted_ = 0;
  mutable std::vector<Work> work_;
  mutable std::vector<int32_t> active_, next_active_;
};

}  // namespace flashserve::router
