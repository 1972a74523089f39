// What the engine loop measures as it runs: prefill seconds per token (the recompute estimate of
// fetch-or-recompute and the router's load view) and the share of recent wall time spent on
// prefill, and requests finished per second (all decaying averages). Engine thread only.
#pragma once

#include <cstdint>
#include <span>

#include "sched/scheduler.h"

namespace flashserve::serve {

class LoopStats {
 public:
  explicit LoopStats(double now_seconds);

  // One engine step over `items` that took `seconds` (ok = the forward succeeded).
  void RecordStep(std::span<const sched::StepItem> items, double seconds, bool ok, int64_t draft_rows = 0);
  // Seconds one prompt token takes, measured on prefill-heavy steps (0 = not measured yet).
  double prefill_seconds_per_token() const { return prefill_seconds_per_token_; }
  // Folds the prefill time recorded since the last call into the busy fraction (a one-minute
  // time constant) and returns it (0..1).
  double UpdateBusyFraction(double now_seconds);
  // Folds the growth of the finished-request count into a decaying average of requests finished
  // per second (a 10 s time constant; updated at most twice a second) and returns it.
  double UpdateFinishRate(double now_seconds, int64_t finished_total);

 private:
  double prefill_seconds_per_token_ = 0;  // moving average over steps of >= 32 tokens
  double step_prefill_seconds_ = 0;       // prefill share of engine time since the last update
  double busy_prefill_sum_ = 0, busy_wall_sum_ = 0, busy_last_seconds_ = 0;  // decaying sums
  double finish_rate_ = 0, finish_last_seconds_ = 0;
  int64_t finish_last_total_ = 0;
  bool finish_last_idle_ = true;  // nothing finished in the last interval
};

}  // namespace flashserve::serve
