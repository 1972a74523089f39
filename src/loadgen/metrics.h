// Per-request measurements and their aggregation into a BenchReport: percentiles, throughput,
// goodput, errors/rejects and prefix-cache hit rates (overall, per turn). Callers: runner,
// report, app. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace flashserve::loadgen {

enum class Outcome { kOk, kError, kRejected };

// One request as the client saw it. Times are seconds; start_s counts from the start of the run
// and ttft_s / e2e_s from the start of the first attempt (waits after a 429 included).
struct RequestRecord {
  int64_t job_idx = 0;   // request index, or conversation index for multi-turn
  int32_t turn_idx = 0;  // 0 for single-turn datasets
  Outcome outcome = Outcome::kError;
  int32_t http_status = 0;  // of the last attempt; 0 when no response arrived
  std::string error;        // why it failed (empty when kOk)
  int32_t num_429 = 0;      // 429 responses received (retried or final)
  double start_s = 0.0;
  double ttft_s = 0.0;
  double e2e_s = 0.0;
  std::vector<double> itl_s;
  bool has_usage = false;         // the stream ended with a usage object
  int64_t prompt_tokens = 0;      // from usage
  int64_t cached_tokens = 0;      // from usage
  int64_t completion_tokens = 0;  // from usage, else the number of token-carrying chunks

  // (e2e - ttft) / (completion_tokens - 1); 0 with fewer than two output tokens.
  double TpotS() const;
};

// Summary statistics, in milliseconds for the latency metrics.
struct Summary {
  int64_t count = 0;
  double mean = 0, stddev = 0, min = 0, median = 0, p90 = 0, p99 = 0, max = 0;
};

// Linear interpolation between closest ranks (numpy's default): rank = p / 100 * (n - 1).
// `sorted` is ascending and non-empty; p in [0, 100].
double Percentile(std::span<const double> sorted, double p);
// All zeros when `values` is empty.
Summary Summarize(std::vector<double> values);

// SLO limits for goodput, in milliseconds; unset limits are not checked.
struct GoodputLimits {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};
// Parses {"ttft:200", "tpot:50", "e2el:5000"}; kInvalidArgument for anything else.
base::Result<GoodputLimits> ParseGoodput(const std::vector<std::string>& specs);
// A completed request within every set limit.
bool MeetsLimits(const RequestRecord& record, const GoodputLimits& limits);

struct TurnStats {
  int32_t turn_idx = 0;
  int64_t num_completed = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  std::optional<double> hit_rate;  // cached / prompt; unset without usage
  double mean_ttft_ms = 0;
};

struct BenchReport {
  double duration_s = 0;
  int64_t num_completed = 0, num_errors = 0, num_rejected = 0;
  int64_t num_429_responses = 0;  // every 429 seen, including retried ones
  int64_t num_requests_with_429 = 0;  // requests that got at least one 429 (retried or final)
  int64_t num_skipped = 0;        // turns never sent (deadline, or an earlier turn failed)
  int64_t num_with_usage = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0, total_cached_tokens = 0;
  double request_throughput = 0, input_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  GoodputLimits goodput_limits;
  int64_t num_good = 0;
  double goodput = 0;  // requests/s meeting the limits (0 when no limits are set)
  std::optional<double> good_fraction;  // num_good / requests sent; unset without limits or requests
  Summary ttft_ms, tpot_ms, itl_ms, e2el_ms;
  std::optional<double> hit_rate;  // sum cached / sum prompt tokens over completed requests
  std::vector<TurnStats> turns;    // per turn index (one entry for single-turn datasets)
  std::map<std::string, int64_t> error_counts;  // failure message -> count
};

// Aggregates completed, failed and rejected records; duration_s is the run's wall time.
BenchReport Aggregate(const std::vector<RequestRecord>& records, double duration_s, const GoodputLimits& limits,
                      int64_t num_skipped);

}  // namespace flashserve::loadgen
