// The benchmark driver: runs a Dataset's jobs against an OpenAI-compatible endpoint, closed
// loop, seeded Poisson arrivals or a trace's timestamps, recording every request. Called by app and tests. Blocks;
// the calling thread drives all I/O on one event loop (and runs the progress callback).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "loadgen/dataset.h"
#include "loadgen/metrics.h"
#include "loadgen/openai_wire.h"

namespace flashserve::loadgen {

struct BenchConfig {
  std::string base_url = "http://127.0.0.1:8000";
  ApiKind api = ApiKind::kChat;
  std::string model;  // empty: the first id listed by GET /v1/models
  std::string api_key;
  double temperature = 0.0;
  std::optional<uint64_t> sampling_seed;  // sent as the request's "seed"
  bool ignore_eos = false;
  // Load shape: concurrency > 0 keeps that many jobs in flight (closed loop); request_rate > 0
  // starts jobs at Poisson arrival times (infinity: all at once), at most max_concurrency
  // (0 = no cap) in flight. A job is one request, or one conversation for multi-turn.
  // Trace datasets start each request at its timestamp x time_scale (0 = at once), at most
  // concurrency (0 = no cap) in flight; request_rate and max_concurrency do not apply.
  int32_t concurrency = 0;
  double request_rate = 0.0;
  int32_t max_concurrency = 0;
  double time_scale = 1.0;  // trace: 0.5 replays twice as fast
  double duration_s = 0.0;  // > 0: start no request after this many seconds
  uint64_t seed = 0;        // arrival times
  // 429 handling: rejected at once, or (honor_retry_after) retried after Retry-After seconds
  // (1 s when absent) up to max_retries times; the wait counts towards the request's latency.
  bool honor_retry_after = false;
  int32_t max_retries = 3;
  double timeout_s = 600.0;  // per connect, read or write
  // Exactly one of concurrency and request_rate is set (or neither: concurrency 1).
  base::Status Validate() const;
};

// The server's vision counters over the run (its /metrics before and after; only for workloads
// with pictures): the tower's time apart from prefill.
struct VisionUsage {
  bool reported = false;       // both scrapes found the counters
  int64_t encoded = 0;         // pictures run through the tower
  int64_t cache_hits = 0;      // pictures answered by the encoder cache
  double encode_seconds = 0;   // tower time
};

struct RunResult {
  std::string model;                   // the model name sent
  std::vector<RequestRecord> records;  // sorted by (job_idx, turn_idx)
  double duration_s = 0.0;             // first request start to last request end
  int64_t num_skipped = 0;             // turns never sent (deadline, or an earlier turn failed)
  int64_t num_connections = 0;         // TCP connections opened
  VisionUsage vision;
};

using ProgressFn = std::function<void(const RequestRecord& record)>;

// Errors only when the run cannot start (bad config or URL, no model name available); failed
// requests are records. `dataset` must have a job limit or the config a duration; a trace
// dataset needs ApiKind::kCompletions (its prompts are token ids) and no request_rate.
base::Result<RunResult> RunBenchmark(const BenchConfig& config, const Dataset& dataset, ProgressFn progress = nullptr);

}  // namespace flashserve::loadgen
