// LoopStats (serve/loop_stats.h).
#include "serve/loop_stats.h"

#include <algorithm>
#include <cmath>

namespace flashserve::serve {

LoopStats::LoopStats(double now_seconds) : busy_last_seconds_(now_seconds), finish_last_seconds_(now_seconds) {}

void LoopStats::RecordStep(std::span<const sched::StepItem> items, double seconds, bool ok, int64_t draft_rows) {
  int64_t tokens = draft_rows, prefill_tokens = 0;  // all rows, and those of multi-token (prefill) items
  for (const sched::StepItem& item : items) {
    tokens += item.end - item.begin;
    if (item.end - item.begin > 1) prefill_tokens += item.end - item.begin;
  }
  if (tokens <= 0) return;
  step_prefill_seconds_ += seconds * static_cast<double>(prefill_tokens) / static_cast<double>(tokens);
  if (!ok || tokens < 32) return;  // a prefill-heavy step updates the recompute estimate
  const double per_token = seconds / static_cast<double>(tokens);
  prefill_seconds_per_token_ =
      prefill_seconds_per_token_ > 0 ? 0.8 * prefill_seconds_per_token_ + 0.2 * per_token : per_token;
}

double LoopStats::UpdateBusyFraction(double now_seconds) {
  const double decay = std::exp(-(now_seconds - busy_last_seconds_) / 60.0);
  busy_prefill_sum_ = busy_prefill_sum_ * decay + step_prefill_seconds_;
  busy_wall_sum_ = busy_wall_sum_ * decay + (now_seconds - busy_last_seconds_);
  busy_last_seconds_ = now_seconds;
  step_prefill_seconds_ = 0;
  return busy_wall_sum_ > 0 ? std::min(1.0, busy_prefill_sum_ / busy_wall_sum_) : 0;
}

double LoopStats::UpdateFinishRate(double now_seconds, int64_t finished_total) {
  const double dt = now_seconds - finish_last_seconds_;
  if (dt < 0.5) return finish_rate_;
  const double now_rate = static_cast<double>(finished_total - finish_last_total_) / dt;
  // After an interval without finishes (the first, or a quiet spell) the rate is taken as it
  // is: ramping up from (near) 0 would overstate how long a queue takes to drain, and so the
  // Retry-After of a worker that just got busy.
  finish_rate_ = finish_last_idle_ ? now_rate : finish_rate_ + (1 - std::exp(-dt / 10.0)) * (now_rate - finish_rate_);
  finish_last_idle_ = finished_total == finish_last_total_;
  finish_last_seconds_ = now_seconds;
  finish_last_total_ = finished_total;
  return finish_rate_;
}

}  // namespace flashserve::serve
