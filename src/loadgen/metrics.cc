// Percentiles, goodput and report aggregation (see metrics.h).
#include "loadgen/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

namespace flashserve::loadgen {

double RequestRecord::TpotS() const {
  if (completion_tokens < 2) return 0.0;
  return (e2e_s - ttft_s) / static_cast<double>(completion_tokens - 1);
}

double Percentile(std::span<const double> sorted, double p) {
  FS_CHECK(!sorted.empty(), "Percentile of an empty sample");
  double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double n = static_cast<double>(values.size());
  s.count = static_cast<int64_t>(values.size());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double sq = 0;
  for (double v : values) sq += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(sq / n);
  s.min = values.front();
  s.max = values.back();
  s.median = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  return s;
}

base::Result<GoodputLimits> ParseGoodput(const std::vector<std::string>& specs) {
  GoodputLimits limits;
  for (const std::string& spec : specs) {
    size_t colon = spec.find(':');
    std::string key = spec.substr(0, colon);
    std::optional<double>* slot = key == "ttft" ? &limits.ttft_ms
                                  : key == "tpot" ? &limits.tpot_ms
                                  : key == "e2el" ? &limits.e2el_ms
                                                  : nullptr;
    if (slot == nullptr || colon == std::string::npos) {
      return base::MakeError(base::ErrorCode::kInvalidArgument,
                             "goodput limit '" + spec + "': expected ttft:MS, tpot:MS or e2el:MS");
    }
    std::string number = spec.substr(colon + 1);
    char* end = nullptr;
    double ms = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(ms) || ms <= 0) {
      return base::MakeError(base::ErrorCode::kInvalidArgument,
                             "goodput limit '" + spec + "': milliseconds must be a positive number");
    }
    *slot = ms;
  }
  return limits;
}

bool MeetsLimits(const RequestRecord& r, const GoodputLimits& limits) {
  if (r.outcome != Outcome::kOk) return false;
  if (limits.ttft_ms && r.ttft_s * 1e3 > *limits.ttft_ms) return false;
  if (limits.tpot_ms && r.TpotS() * 1e3 > *limits.tpot_ms) return false;
  if (limits.e2el_ms && r.e2e_s * 1e3 > *limits.e2el_ms) return false;
  return true;
}

namespace {
std::vector<TurnStats> PerTurn(const std::vector<RequestRecord>& records) {
  std::map<int32_t, TurnStats> turns;
  std::map<int32_t, double> ttft_sum;
  for (const RequestRecord& r : records) {
    if (r.outcome != Outcome::kOk) continue;
    TurnStats& t = turns[r.turn_idx];
    t.turn_idx = r.turn_idx;
    ++t.num_completed;
    ttft_sum[r.turn_idx] += r.ttft_s;
    if (r.has_usage) {
      t.prompt_tokens += r.prompt_tokens;
      t.cached_tokens += r.cached_tokens;
    }
  }
  std::vector<TurnStats> out;
  for (auto& [idx, t] : turns) {
    t.mean_ttft_ms = ttft_sum[idx] / static_cast<double>(t.num_completed) * 1e3;
    if (t.prompt_tokens > 0) t.hit_rate = static_cast<double>(t.cached_tokens) / static_cast<double>(t.prompt_tokens);
    out.push_back(t);
  }
  return out;
}
}  // namespace

BenchReport Aggregate(const std::vector<RequestRecord>& records, double duration_s, const GoodputLimits& limits,
                      int64_t num_skipped) {
  BenchReport rep;
  rep.duration_s = duration_s;
  rep.goodput_limits = limits;
  rep.num_skipped = num_skipped;
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t usage_prompt_tokens = 0;
  for (const RequestRecord& r : records) {
    rep.num_429_responses += r.num_429;
    if (r.num_429 > 0) ++rep.num_requests_with_429;
    if (r.outcome == Outcome::kRejected) ++rep.num_rejected;
    if (r.outcome == Outcome::kError) ++rep.num_errors;
    if (r.outcome != Outcome::kOk) {
      ++rep.error_counts[r.error];
      continue;
    }
    ++rep.num_completed;
    ttft.push_back(r.ttft_s * 1e3);
    e2el.push_back(r.e2e_s * 1e3);
    if (r.completion_tokens > 1) tpot.push_back(r.TpotS() * 1e3);
    for (double gap : r.itl_s) itl.push_back(gap * 1e3);
    rep.total_input_tokens += r.prompt_tokens;
    rep.total_output_tokens += r.completion_tokens;
    if (r.has_usage) {
      ++rep.num_with_usage;
      usage_prompt_tokens += r.prompt_tokens;
      rep.total_cached_tokens += r.cached_tokens;
    }
    if (!limits.empty() && MeetsLimits(r, limits)) ++rep.num_good;
  }
  if (duration_s > 0) {
    rep.request_throughput = static_cast<double>(rep.num_completed) / duration_s;
    rep.input_throughput = static_cast<double>(rep.total_input_tokens) / duration_s;
    rep.output_throughput = static_cast<double>(rep.total_output_tokens) / duration_s;
    rep.total_token_throughput = rep.input_throughput + rep.output_throughput;
    rep.goodput = static_cast<double>(rep.num_good) / duration_s;
  }
  if (!limits.empty() && !records.empty())
    rep.good_fraction = static_cast<double>(rep.num_good) / static_cast<double>(records.size());
  rep.ttft_ms = Summarize(std::move(ttft));
  rep.tpot_ms = Summarize(std::move(tpot));
  rep.itl_ms = Summarize(std::move(itl));
  rep.e2el_ms = Summarize(std::move(e2el));
  if (usage_prompt_tokens > 0)
    rep.hit_rate = static_cast<double>(rep.total_cached_tokens) / static_cast<double>(usage_prompt_tokens);
  rep.turns = PerTurn(records);
  return rep;
}

}  // namespace flashserve::loadgen
