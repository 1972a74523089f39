// Continuous-batching policy (design.md section 3): which sequences run in the next engine
// step and which tokens each feeds. Decode tokens of running sequences go first (streams keep
// flowing), then chunks of unfinished prefills, then newly admitted requests, all within a
// per-step token budget; prefill chunks end at persist points (block boundaries where the
// server snapshots state into the prefix cache). Sequence state memory is accounted in a
// bounded pool; when a step would exceed it, the most recently admitted running sequence is
// preempted (its state freed, its tokens kept, resumed later by recompute). Plain data, no
// engine types; engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "base/result.h"

namespace flashserve::sched {

struct SchedConfig {
  int64_t max_step_tokens = 512;      // tokens fed to the engine per step (all sequences)
  int max_running = 32;               // sequences in the batch
  int64_t max_waiting = 1024;         // queued sequences before Add refuses
  int64_t state_pool_bytes = 4ll << 30;
  int64_t persist_every_blocks = 8;   // snapshot long prompts every N blocks (0 = only at the end)
  int64_t block_tokens = 128;
  base::Status Validate() const;
};

enum class SeqStatus { kWaiting, kRunning };

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;   // prompt, then generated tokens
  int64_t num_prompt = 0;
  int64_t num_computed = 0;      // tokens already in the engine state
  SeqStatus status = SeqStatus::kWaiting;
  int64_t admitted_order = 0;    // larger = admitted later
  int64_t pool_bytes = 0;        // accounted state memory
  int64_t num_preemptions = 0;
};

struct StepItem {
  uint64_t seq_id = 0;
  int64_t begin = 0, end = 0;    // tokens [begin, end) are fed
  bool sample = false;           // end == tokens.size(): the logits of the last one are sampled
  bool persist = false;          // end is a persist point (block boundary) to snapshot
};

struct StepPlan {
  std::vector<StepItem> items;
  std::vector<uint64_t> preempted;  // their engine state must be freed before the step
  int64_t num_tokens = 0;
};

// Admission of a waiting sequence in two phases: `probe` says how many prompt tokens a
// restore could provide (no side effects); after the memory check, `restore` builds the state
// and returns the tokens it really holds (0 = start fresh).
struct AdmitHooks {
  std::function<int64_t(const Sequence&)> probe;
  std::function<int64_t(Sequence&, int64_t)> restore;
};
// Bytes of sequence state at a given number of computed tokens.
using StateBytesFn = std::function<int64_t(int64_t position)>;

class Scheduler {
 public:
  Scheduler(const SchedConfig& config, StateBytesFn state_bytes);

  // Queues a sequence (status waiting). kResourceExhausted when the waiting queue is full.
  base::Status Add(Sequence seq);
  // Adds `child` as a copy of running sequence `parent_id` (same tokens, same computed
  // position: the caller clones the engine state). When the pool cannot hold it, the child
  // is queued instead (it will recompute). Returns whether the child is running.
  bool Fork(uint64_t parent_id, uint64_t child_id);
  // Drops a sequence wherever it is; returns whether it existed.
  bool Remove(uint64_t seq_id);
  Sequence* Find(uint64_t seq_id);

  StepPlan Plan(const AdmitHooks& admit);
  // After the engine ran `item`: the state now holds item.end tokens; a sampled token is
  // appended to the sequence.
  void Commit(const StepItem& item, std::optional<int32_t> sampled);

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
  bool InPlan(const StepPlan& plan, uint64_t id) const;
  void Preempt(Sequence& s, StepPlan* plan);
  void ScheduleRunning(StepPlan* plan);
  void AdmitWaiting(const AdmitHooks& admit, StepPlan* plan);
  void AddItem(Sequence& s, int64_t len, StepPlan* plan);
  int64_t ChunkLength(const Sequence& s, int64_t budget) const;

  SchedConfig config_;
  StateBytesFn state_bytes_;
  std::map<uint64_t, Sequence> seqs_;
  std::deque<uint64_t> waiting_;   // front = next to admit
  std::vector<uint64_t> running_;  // admission order
  int64_t pool_used_ = 0;
  int64_t admit_counter_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace flashserve::sched
