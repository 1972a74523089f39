// Routing simulator: replays a trace once per policy against N simulated workers (LRU caches,
// FIFO prefill, decode) with the real PrefixIndex, LoadView and Chooser; reports hit rate, TTFT,
// load spread and decision latency. Used by bench/route_sim.cc and tests; single-threaded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "router/policy.h"
#include "router/trace.h"

namespace flashserve::router {

// Policies: "round-robin", "least-load", "cache-aware" (the Chooser), "session-affinity"
// (rendezvous hash of the session, or of the first block id without one; no load, no 429),
// "oracle" (one infinite cache shared by all: the hit-rate ceiling; no timing).
struct SimOptions {
  int workers = 4;
  std::vector<std::string> policies = {"round-robin", "least-load", "cache-aware", "session-affinity", "oracle"};
  int64_t memory_blocks = 4096;     // per worker, in block units
  int64_t disk_blocks = 16384;      // per worker (0 = no disk tier)
  int32_t boundary_units = 8;       // a boundary snapshot takes this many block units (~4 MB vs 540 KB)
  int boundary_every_blocks = 16;   // persist points: every N blocks and the end of each prompt
  double prefill_tokens_per_s = 1000;
  double decode_tokens_per_s = 50;  // per sequence
  double event_delay_s = 0.05;      // KV events reach the index this late
  double poll_interval_s = 0.5;     // load polls
  double busy_window_s = 60;        // workers report their busy fraction over about this long
  int64_t index_entries_per_worker = 0;  // PrefixIndex cap (0 = none)
  int64_t tokens_per_id = 128;      // tokens a trace hash id stands for
  // The cache-aware knobs and the fetch costs the simulated workers also pay (disk reads cost
  // disk_seconds_per_token per cached token, plus boundary_fetch_tokens of them per boundary).
  // policy is set per run; default_prefill_tokens_per_s is set to prefill_tokens_per_s.
  ChooserConfig chooser;

  base::Status Validate() const;
};

struct PolicyReport {
  std::string policy;
  bool timed = true;  // false for the oracle (hit rate only)
  int64_t requests = 0, rejected = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, memory_tokens = 0, disk_tokens = 0;
  double hit_rate = 0;  // cached / prompt tokens of the served requests
  double mean_ttft_s = 0, p50_ttft_s = 0, p99_ttft_s = 0;
  double max_busy_s = 0, min_busy_s = 0, mean_busy_s = 0;  // per-worker prefill + fetch time
  int64_t max_prefill_tokens = 0, min_prefill_tokens = 0;    // per-worker computed tokens
  double utilization = 0;                                    // busy / (workers x makespan)
  double decision_p50_us = 0, decision_p99_us = 0, decision_max_us = 0;
  int64_t affinity_picks = 0, balance_overrides = 0;
  int64_t session_moves = 0;  // requests sent to another worker than their session's previous one
  double wall_s = 0;

  double load_ratio() const { return min_busy_s > 0 ? max_busy_s / min_busy_s : 0; }
  double max_to_mean() const { return mean_busy_s > 0 ? max_busy_s / mean_busy_s : 0; }
};

struct SimReport {
  int workers = 0;
  int64_t requests = 0;
  int64_t prompt_tokens = 0;
  double trace_span_s = 0;
  int64_t distinct_blocks = 0;
  std::vector<PolicyReport> policies;

  const PolicyReport* Find(const std::string& policy) const;
  std::string Format() const;  // a Markdown table and a summary line
  void Print() const;          // Format() to stdout
};

base::Result<SimReport> RunRouteSim(std::span<const TraceRequest> trace, const SimOptions& options);

}  // namespace flashserve::router
