// LoadView: the router's latest picture of each worker's load (health, queued prefill tokens,
// running sequences, free state memory, TTFT, measured prefill speed), from stats polls plus
// optimistic additions for requests routed since. Routing thread only (not thread-safe).
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace flashserve::router {

// One worker's stats as its poll reports them.
struct WorkerLoad {
  bool healthy = true;
  int64_t queued_prefill_tokens = 0;  // prompt tokens waiting for or in prefill (uncached part)
  int64_t queued_images = 0;          // pictures waiting for or in the vision tower
  int64_t running_sequences = 0;      // sequences in decode
  int64_t free_state_bytes = 0;       // room for new sequence state
  double recent_ttft_s = 0;           // recent mean time to first token
  double prefill_tokens_per_s = 0;    // measured by the worker; 0 = not measured yet
  double busy_fraction = 0;           // share of the last minute or so spent on prefill (0..1)
  double updated_at_s = 0;            // when the poll was taken (caller's monotonic clock)
};

class LoadView {
 public:
  // Registers a worker id (the id PrefixIndex::AddWorker returned); healthy with no load until
  // its first poll. Re-adding a present id resets it.
  void AddWorker(int worker);
  void RemoveWorker(int worker);
  // A poll result: replaces everything, including the optimistic additions since the last poll.
  base::Status Update(int worker, const WorkerLoad& load);
  // A request was just sent to `worker`: until the next poll, count its uncached tokens as queued.
  void OnRouted(int worker, int64_t uncached_tokens);
  // Pictures were just sent to encode worker `worker`: counted as queued until the next poll.
  void OnImagesRouted(int worker, int64_t images);
  // A request to `worker` failed to connect or the worker stopped answering.
  void MarkUnhealthy(int worker);
  // Marks unhealthy every worker whose last poll is older than max_age_s; returns how many.
  int MarkStale(double now_s, double max_age_s);

  bool present(int worker) const {
    return worker >= 0 && worker < num_slots() && slots_[worker].present;
  }
  // The worker's load; only for present workers.
  const WorkerLoad& load(int worker) const { return slots_[worker].load; }
  int64_t routed_since_poll(int worker) const { return slots_[worker].routed_since_poll; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  int num_healthy() const;

 private:
  struct Slot {
    bool present = false;
    WorkerLoad load;
    int64_t routed_since_poll = 0;
  };
  std::vector<Slot> slots_;
};

}  // namespace flashserve::router
