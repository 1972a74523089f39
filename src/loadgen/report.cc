// Table and JSON output of a benchmark run (see report.h).
#include "loadgen/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>


namespace flashserve::loadgen {

namespace {
using Json = nlohmann::json;

std::string LoadShape(const BenchConfig& c) {
  if (c.request_rate > 0) {
    std::string rate = std::isinf(c.request_rate) ? "all at once" : fmt::format("Poisson {:.2f} req/s", c.request_rate);
    return c.max_concurrency > 0 ? fmt::format("{}, max concurrency {}", rate, c.max_concurrency) : rate;
  }
  return fmt::format("concurrency {}", std::max(c.concurrency, 1));
}

std::string GoodputLabel(const GoodputLimits& g) {
  std::string s;
  if (g.ttft_ms) s += fmt::format(" ttft<={}ms", *g.ttft_ms);
  if (g.tpot_ms) s += fmt::format(" tpot<={}ms", *g.tpot_ms);
  if (g.e2el_ms) s += fmt::format(" e2el<={}ms", *g.e2el_ms);
  return s;
}

void Row(std::string* out, std::string_view label, const std::string& value) {
  *out += fmt::format("{:<44}{}\n", label, value);
}

void SummaryRows(std::string* out, std::string_view title, std::string_view name, const Summary& s) {
  *out += fmt::format("{:-^56}\n", fmt::format(" {} ", title));
  Row(out, fmt::format("Mean {} (ms):", name), fmt::format("{:.2f}", s.mean));
  Row(out, fmt::format("Median {} (ms):", name), fmt::format("{:.2f}", s.median));
  Row(out, fmt::format("P90 {} (ms):", name), fmt::format("{:.2f}", s.p90));
  Row(out, fmt::format("P99 {} (ms):", name), fmt::format("{:.2f}", s.p99));
}

Json SummaryJson(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"stddev", s.stddev}, {"min", s.min}, {"median", s.median},
          {"p90", s.p90},     {"p99", s.p99},   {"max", s.max}};
}

Json OptionalJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json ParamsJson(const RunInfo& info) {
  const BenchConfig& c = *info.config;
  const DatasetConfig& d = *info.dataset;
  Json p = {{"base_url", c.base_url},
            {"endpoint", std::string(ApiPath(c.api))},
            {"model", info.model},
            {"temperature", c.temperature},
            {"sampling_seed", c.sampling_seed ? Json(*c.sampling_seed) : Json(nullptr)},
            {"ignore_eos", c.ignore_eos || d.kind == DatasetKind::kTrace},  // trace requests always send it
            {"concurrency", c.request_rate > 0 ? 0 : std::max(c.concurrency, 1)},
            {"request_rate", std::isinf(c.request_rate) ? Json("inf") : Json(c.request_rate)},
            {"max_concurrency", c.max_concurrency},
            {"duration_s", c.duration_s},
            {"seed", c.seed},
            {"honor_retry_after", c.honor_retry_after},
            {"max_retries", c.max_retries},
            {"timeout_s", c.timeout_s},
            {"num_connections", info.num_connections},
            {"tokenizer", info.tokenizer.empty() ? Json(nullptr) : Json(info.tokenizer)}};
  p["dataset"] = {{"name", std::string(DatasetKindName(d.kind))}, {"seed", d.seed},
                  {"length_unit", info.tokenizer.empty() && d.kind != DatasetKind::kTrace ? "words" : "tokens"},
                  {"output_len", d.output_len}};
  Json& ds = p["dataset"];
  if (d.kind == DatasetKind::kRandom) {
    ds.update({{"num_requests", d.num_requests}, {"input_len", d.input_len}, {"range_ratio", d.range_ratio}});
  } else if (d.kind == DatasetKind::kSharedPrefix) {
    ds.update({{"num_requests", d.num_requests}, {"num_prefixes", d.num_prefixes}, {"prefix_len", d.prefix_len},
               {"suffix_len", d.suffix_len}});
  } else if (d.kind == DatasetKind::kMultiTurn) {
    ds.update({{"num_conversations", d.num_conversations}, {"turns", d.turns}, {"turn_len", d.turn_len},
               {"num_prefixes", d.num_prefixes}, {"prefix_len", d.prefix_len},
               {"turn_image", d.turn_image_width > 0 ? Json(fmt::format("{}x{}", d.turn_image_width, d.turn_image_height))
                                                     : Json(nullptr)}});
  } else {
    ds.erase("output_len");  // max_tokens come from the trace
    ds.update({{"trace", d.trace_path}, {"num_requests", info.num_jobs}, {"block_tokens", d.trace_block_tokens},
               {"vocab", d.trace_vocab}, {"time_scale", c.time_scale},
               {"max_input_len", d.max_input_len > 0 ? Json(d.max_input_len) : Json(nullptr)},
               {"num_clipped", info.num_clipped}});
  }
  return p;
}

Json RequestJson(const RequestRecord& r) {
  Json itl = Json::array();
  for (double gap : r.itl_s) itl.push_back(gap * 1e3);
  return {{"job", r.job_idx},
          {"turn", r.turn_idx},
          {"outcome", r.outcome == Outcome::kOk ? "ok" : r.outcome == Outcome::kRejected ? "rejected" : "error"},
          {"http_status", r.http_status},
          {"error", r.error},
          {"num_429", r.num_429},
          {"start_ms", r.start_s * 1e3},
          {"ttft_ms", r.ttft_s * 1e3},
          {"tpot_ms", r.TpotS() * 1e3},
          {"e2el_ms", r.e2e_s * 1e3},
          {"itl_ms", std::move(itl)},
          {"has_usage", r.has_usage},
          {"prompt_tokens", r.prompt_tokens},
          {"cached_tokens", r.cached_tokens},
          {"completion_tokens", r.completion_tokens}};
}

std::string DatasetLabel(const RunInfo& info) {
  const DatasetConfig& d = *info.dataset;
  if (d.kind != DatasetKind::kTrace)
    return fmt::format("{} (seed {}, lengths in {})", DatasetKindName(d.kind), d.seed,
                       info.tokenizer.empty() ? "words" : "tokens");
  return fmt::format("trace {} ({} requests, {} tokens per hash id, seed {})", d.trace_path, info.num_jobs,
                     d.trace_block_tokens, d.seed);
}

void TraceRows(std::string* out, const RunInfo& info) {
  const DatasetConfig& d = *info.dataset;
  const BenchConfig& c = *info.config;
  Row(out, "Load:", fmt::format("trace timestamps x {}{}", c.time_scale,
                                c.concurrency > 0 ? fmt::format(", max concurrency {}", c.concurrency) : ""));
  Row(out, "Prompts clipped to max-input-len:",
      d.max_input_len > 0 ? fmt::format("{} (limit {} tokens)", info.num_clipped, d.max_input_len) : "0 (no limit)");
}

void GoodputRows(std::string* out, const BenchReport& r) {
  if (r.goodput_limits.empty()) return;
  Row(out, fmt::format("Goodput (req/s,{}):", GoodputLabel(r.goodput_limits)),
      fmt::format("{:.2f} ({} of {} completed)", r.goodput, r.num_good, r.num_completed));
  if (r.good_fraction) Row(out, "Requests meeting the SLOs:", fmt::format("{:.1f}% of sent", *r.good_fraction * 100));
}
}  // namespace

void VisionRows(std::string* out, const VisionUsage& v) {
  if (!v.reported) return Row(out, "Pictures:", "n/a (the server's /metrics has no encoder counters)");
  Row(out, "Pictures encoded / encoder-cache hits:", fmt::format("{} / {}", v.encoded, v.cache_hits));
  Row(out, "Tower time (s):", fmt::format("{:.2f}", v.encode_seconds));
  Row(out, "Tower time per encoded picture (ms):",
      v.encoded > 0 ? fmt::format("{:.1f}", 1e3 * v.encode_seconds / static_cast<double>(v.encoded)) : "n/a");
}

std::string FormatTable(const BenchReport& r, const RunInfo& info) {
  const BenchConfig& c = *info.config;
  std::string out = fmt::format("{:=^56}\n", " Serving Benchmark Result ");
  Row(&out, "Endpoint:", c.base_url + std::string(ApiPath(c.api)));
  Row(&out, "Model:", info.model);
  Row(&out, "Dataset:", DatasetLabel(info));
  if (info.dataset->kind == DatasetKind::kTrace) {
    TraceRows(&out, info);
  } else {
    Row(&out, "Load:", LoadShape(c));
  }
  Row(&out, "Benchmark duration (s):", fmt::format("{:.2f}", r.duration_s));
  Row(&out, "Completed requests:", std::to_string(r.num_completed));
  Row(&out, "Failed requests:", std::to_string(r.num_errors));
  Row(&out, "Rejected requests (final 429):", std::to_string(r.num_rejected));
  Row(&out, "429 responses (incl. retried):", std::to_string(r.num_429_responses));
  Row(&out, "Requests that got a 429:", std::to_string(r.num_requests_with_429));
  if (r.num_skipped > 0) Row(&out, "Turns not sent:", std::to_string(r.num_skipped));
  Row(&out, "Total input tokens:", std::to_string(r.total_input_tokens));
  Row(&out, "Total output tokens:", std::to_string(r.total_output_tokens));
  Row(&out, "Request throughput (req/s):", fmt::format("{:.2f}", r.request_throughput));
  Row(&out, "Input token throughput (tok/s):", fmt::format("{:.2f}", r.input_throughput));
  Row(&out, "Output token throughput (tok/s):", fmt::format("{:.2f}", r.output_throughput));
  Row(&out, "Total token throughput (tok/s):", fmt::format("{:.2f}", r.total_token_throughput));
  GoodputRows(&out, r);
  if (info.dataset->turn_image_width > 0) VisionRows(&out, info.vision);
  Row(&out, "Prefix cache hit rate:",
      r.hit_rate ? fmt::format("{:.1f}% ({} of {} prompt tokens)", *r.hit_rate * 100, r.total_cached_tokens,
                               r.total_input_tokens)
                 : std::string("n/a (no usage in the responses)"));
  SummaryRows(&out, "Time to First Token", "TTFT", r.ttft_ms);
  SummaryRows(&out, "Time per Output Token (excl. 1st token)", "TPOT", r.tpot_ms);
  SummaryRows(&out, "Inter-token Latency", "ITL", r.itl_ms);
  SummaryRows(&out, "End-to-end Latency", "E2EL", r.e2el_ms);
  if (r.turns.size() > 1) {
    out += fmt::format("{:-^56}\n", " Per turn ");
    out += fmt::format("{:>4} {:>9} {:>11} {:>11} {:>8} {:>9}\n", "turn", "completed", "prompt tok", "cached tok",
                       "hit", "TTFT ms");
    for (const TurnStats& t : r.turns)
      out += fmt::format("{:>4} {:>9} {:>11} {:>11} {:>8} {:>9.2f}\n", t.turn_idx, t.num_completed, t.prompt_tokens,
                         t.cached_tokens, t.hit_rate ? fmt::format("{:.1f}%", *t.hit_rate * 100) : "n/a",
                         t.mean_ttft_ms);
  }
  if (!r.error_counts.empty()) {
    out += fmt::format("{:-^56}\n", " Failures ");
    int shown = 0;
    for (const auto& [message, count] : r.error_counts)
      if (shown++ < 8) out += fmt::format("{:>6} x {}\n", count, message);
    if (r.error_counts.size() > 8) out += fmt::format("       ... {} more kinds\n", r.error_counts.size() - 8);
  }
  out += std::string(56, '=') + "\n";
  return out;
}

std::string ReportJson(const BenchReport& r, const RunInfo& info, const std::vector<RequestRecord>* requests) {
  Json res = {{"duration_s", r.duration_s},
              {"completed", r.num_completed},
              {"errors", r.num_errors},
              {"rejected", r.num_rejected},
              {"responses_429", r.num_429_responses},
              {"requests_with_429", r.num_requests_with_429},
              {"turns_not_sent", r.num_skipped},
              {"completed_with_usage", r.num_with_usage},
              {"total_input_tokens", r.total_input_tokens},
              {"total_output_tokens", r.total_output_tokens},
              {"cached_prompt_tokens", r.total_cached_tokens},
              {"vision", info.vision.reported ? Json{{"encoded", info.vision.encoded}, {"cache_hits", info.vision.cache_hits},
                                                     {"encode_seconds", info.vision.encode_seconds}} : Json(nullptr)},
              {"request_throughput", r.request_throughput},
              {"input_token_throughput", r.input_throughput},
              {"output_token_throughput", r.output_throughput},
              {"total_token_throughput", r.total_token_throughput},
              {"prefix_cache_hit_rate", OptionalJson(r.hit_rate)},
              {"ttft_ms", SummaryJson(r.ttft_ms)},
              {"tpot_ms", SummaryJson(r.tpot_ms)},
              {"itl_ms", SummaryJson(r.itl_ms)},
              {"e2el_ms", SummaryJson(r.e2el_ms)},
              {"error_counts", r.error_counts}};
  res["goodput"] = {{"limits_ms",
                     {{"ttft", OptionalJson(r.goodput_limits.ttft_ms)},
                      {"tpot", OptionalJson(r.goodput_limits.tpot_ms)},
                      {"e2el", OptionalJson(r.goodput_limits.e2el_ms)}}},
                    {"requests_per_s", r.goodput_limits.empty() ? Json(nullptr) : Json(r.goodput)},
                    {"num_good", r.num_good},
                    {"fraction", OptionalJson(r.good_fraction)}};
  Json turns = Json::array();
  for (const TurnStats& t : r.turns)
    turns.push_back({{"turn", t.turn_idx}, {"completed", t.num_completed}, {"prompt_tokens", t.prompt_tokens},
                     {"cached_tokens", t.cached_tokens}, {"hit_rate", OptionalJson(t.hit_rate)},
                     {"mean_ttft_ms", t.mean_ttft_ms}});
  res["turns"] = std::move(turns);
  Json doc = {{"params", ParamsJson(info)}, {"results", std::move(res)}};
  if (requests) {
    Json list = Json::array();
    for (const RequestRecord& rec : *requests) list.push_back(RequestJson(rec));
    doc["requests"] = std::move(list);
  }
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace flashserve::loadgen
