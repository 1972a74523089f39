// Continuous-batching policy (design.md section 3): which sequences run in the next engine
// step and which tokens each feeds. Decode tokens of running sequences go first (streams keep
// flowing), then chunks of unfinished prefills, then newly admitted requests, all within a
// per-step token budget; prefill chunks end at persist points (block boundaries where the
// loop snapshots state into the prefix cache) and never inside an atomic range. Admission asks the prefix cache (kv::ResumeIndex)
// how much of a sequence it can restore. Sequence state memory is accounted in a bounded pool;
// when a step would exceed it, the most recently admitted running sequence is preempted (its
// state freed, its tokens kept, resumed later by recompute). Plain data, no engine types;
// engine thread only. The caller owns the sequences; the scheduler holds pointers to them.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "base/result.h"
#include "kv/resume.h"

namespace flashserve::sched {

struct SchedConfig {
  int64_t max_step_tokens = 512;      // tokens fed to the engine per step (all sequences)
  int max_running = 32;               // sequences in the batch
  int64_t max_waiting = 1024;         // queued requests before the loop refuses new ones (429)
  int64_t state_pool_bytes = 4ll << 30;
  int64_t persist_every_blocks = 8;   // snapshot long prompts every N blocks (0 = only at the end)
  int64_t block_tokens = 128;
  base::Status Validate() const;
};

enum class SeqStatus { kWaiting, kRunning };

// The scheduler's view of one sequence. The caller fills the first four fields; the rest are the
// scheduler's. A caller may derive its own record from it (one record per sequence).
struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;   // prompt, then generated tokens
  int64_t num_prompt = 0;
  kv::BlockHash cache_seed{};    // the prefix cache's hash seed (model and cache namespace)
  std::vector<kv::ImageExtent> images;  // pictures in the prompt (their keys are in the block hashes)
  // Tokens whose input the caller has (pictures still encoding: the first one's start); chunks
  // stop there, and a sequence that reached it waits without holding up the others.
  int64_t input_limit = INT64_MAX;
  // Prompt ranges [first, second) one chunk must hold whole (bidirectional picture spans),
  // increasing: a chunk that would end inside one ends before it, or takes it whole when it
  // starts there (over the step's budget if need be). A cached prefix ending inside one is not
  // resumed.
  std::vector<std::pair<int64_t, int64_t>> atomic_ranges;
  int64_t num_computed = 0;      // tokens already in the engine state
  SeqStatus status = SeqStatus::kWaiting;
  int64_t admitted_order = 0;    // larger = admitted later
  int64_t pool_bytes = 0;        // accounted state memory
  int64_t num_preemptions = 0;
  bool skip_cache = false;       // its last restore met bad objects: the next admission recomputes
};

struct StepItem {
  Sequence* seq = nullptr;
  int64_t begin = 0, end = 0;    // tokens [begin, end) are fed
  bool sample = false;           // end == tokens.size(): the logits of the last one are sampled
  bool persist = false;          // end is a persist point (block boundary) to snapshot
  bool restore = false;          // admitted on a cache hit: tokens [0, begin) are restored first
};

struct StepPlan {
  std::vector<StepItem> items;
  std::vector<Sequence*> preempted;  // their engine state must be freed before the step
  int64_t num_tokens = 0;
};

// Bytes of sequence state at a given number of computed tokens.
using StateBytesFn = std::function<int64_t(int64_t position)>;

class Scheduler {
 public:
  Scheduler(const SchedConfig& config, StateBytesFn state_bytes);

  // Queues a sequence (status waiting); it must stay at its address until Remove. Never
  // refuses: the loop bounds the requests it accepts (max_waiting), and preempted or forked
  // sequences must always find room in the queue.
  void Add(Sequence* seq);
  // Makes `child` (its id set by the caller) a copy of running `parent`: same tokens, same
  // computed position (the caller clones the engine state). When the pool cannot hold it, the
  // child is queued instead (it will recompute). Returns whether the child is running.
  bool Fork(const Sequence& parent, Sequence* child);
  // Drops a sequence wherever it is and releases its pool bytes; whether it was there.
  bool Remove(Sequence* seq);

  // The next step. `cache` (null: none) says what admitted sequences can restore; a hit
  // becomes the item's restore flag and its begin.
  StepPlan Plan(const kv::ResumeIndex* cache);
  // After the engine ran `item`: the state now holds item.end tokens; a sampled token is
  // appended to the sequence.
  void Commit(const StepItem& item, std::optional<int32_t> sampled);
  // The restore of a planned item failed; its item must not run. The sequence goes back to the
  // front of the queue with no pool bytes held. `objects_gone` (evicted since the plan): its
  // next admission asks the cache again; else (objects that do not assemble) it recomputes
  // without the cache, so bad objects cannot make it retry forever.
  void RestoreFailed(const StepItem& item, bool objects_gone);

  int64_t pool_used() const { return pool_used_; }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Prompt tokens of queued and running sequences not yet in the engine state (the prefill
  // work ahead; the router's load view). O(sequences).
  int64_t PendingPromptTokens() const;
  const SchedConfig& config() const { return config_; }

 private:
  int64_t NextPersistPoint(const Sequence& s) const;
  bool Reserve(Sequence& s, int64_t new_position, StepPlan* plan, bool may_preempt);
  static bool InPlan(const StepPlan& plan, const Sequence* s);
  void Preempt(Sequence& s, StepPlan* plan);
  void ScheduleRunning(StepPlan* plan);
  void AdmitWaiting(const kv::ResumeIndex* cache, StepPlan* plan);
  int64_t CachedTokens(const kv::ResumeIndex* cache, const Sequence& s) const;
  void AddItem(Sequence& s, int64_t len, bool restore, StepPlan* plan);
  int64_t ChunkLength(const Sequence& s, int64_t budget) const;

  SchedConfig config_;
  StateBytesFn state_bytes_;
  std::deque<Sequence*> waiting_;   // front = next to admit
  std::vector<Sequence*> running_;  // admission order
  int64_t pool_used_ = 0;
  int64_t admit_counter_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace flashserve::sched
