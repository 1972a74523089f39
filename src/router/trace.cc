// Trace reading/writing, block-chain interning and the synthetic agent workload (router/trace.h).
#include "router/trace.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/file_util.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace flashserve::router {
namespace {

using nlohmann::json;

base::Error BadLine(int line, std::string_view what) {
  return base::MakeError(base::ErrorCode::kInvalidArgument, fmt::format("trace line {}: {}", line, what));
}

base::Result<TraceRequest> ParseLine(std::string_view text, int line) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return BadLine(line, "not a JSON object");
  TraceRequest r;
  auto number = [&](const char* key, bool required, double* out) -> base::Status {
    auto it = j.find(key);
    if (it == j.end()) return required ? base::Status(BadLine(line, fmt::format("missing \"{}\"", key))) : base::Status();
    if (!it->is_number() || it->get<double>() < 0) return BadLine(line, fmt::format("\"{}\" must be a number >= 0", key));
    *out = it->get<double>();
    return base::Status::Ok();
  };
  double ms = 0, input = 0, output = 0;
  FS_RETURN_IF_ERROR(number("timestamp", true, &ms));
  FS_RETURN_IF_ERROR(number("input_length", true, &input));
  FS_RETURN_IF_ERROR(number("output_length", false, &output));
  r.arrival_s = ms / 1000.0;
  r.input_tokens = static_cast<int64_t>(input);
  r.output_tokens = static_cast<int64_t>(output);
  auto ids = j.find("hash_ids");
  if (ids == j.end() || !ids->is_array()) return BadLine(line, "\"hash_ids\" must be an array");
  r.hash_ids.reserve(ids->size());
  for (const json& id : *ids) {
    if (!id.is_number_integer()) return BadLine(line, "\"hash_ids\" must hold integers");
    r.hash_ids.push_back(id.get<int64_t>());
  }
  auto session = j.find("session");
  if (session != j.end() && !session->is_null()) {
    if (!session->is_string()) return BadLine(line, "\"session\" must be a string");
    r.session = session->get<std::string>();
  }
  return r;
}

// Exponential with the given mean, at least `floor`, rounded to whole tokens.
int64_t ExpTokens(std::mt19937_64& rng, double mean, int64_t floor) {
  std::exponential_distribution<double> d(1.0 / mean);
  return std::max<int64_t>(floor, static_cast<int64_t>(std::llround(d(rng))));
}

}  // namespace

base::Result<std::vector<TraceRequest>> ParseTrace(std::string_view jsonl) {
  std::vector<TraceRequest> out;
  int line = 0;
  size_t pos = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    const std::string_view text = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    FS_ASSIGN_OR_RETURN(TraceRequest r, ParseLine(text, line));
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

base::Result<std::vector<TraceRequest>> ReadTrace(const std::string& path) {
  FS_ASSIGN_OR_RETURN(std::string text, base::ReadFileToString(path));
  auto trace = ParseTrace(text);
  if (!trace.ok()) return trace.error().WithContext(path);
  return trace;
}

std::string FormatTrace(std::span<const TraceRequest> trace) {
  std::string out;
  for (const TraceRequest& r : trace) {
    json j;
    j["timestamp"] = static_cast<int64_t>(std::llround(r.arrival_s * 1000.0));
    j["input_length"] = r.input_tokens;
    j["output_length"] = r.output_tokens;
    j["hash_ids"] = r.hash_ids;
    if (!r.session.empty()) j["session"] = r.session;
    out += j.dump();
    out += '\n';
  }
  return out;
}

base::Status WriteTrace(std::span<const TraceRequest> trace, const std::string& path) {
  return base::WriteFileAtomic(path, FormatTrace(trace));
}

size_t BlockTable::KeyHasher::operator()(const Key& k) const {
  uint64_t h = (static_cast<uint64_t>(k.parent) << 32 | k.sub) * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(k.id) + 0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
  return static_cast<size_t>(h * 0xff51afd7ed558ccdULL);
}

BlockTable::BlockTable(int64_t tokens_per_id)
    : blocks_per_id_(std::max<int64_t>(1, tokens_per_id / kv::kBlockTokens)), seed_(kv::HashSeed("route-sim", "")) {}

void BlockTable::Intern(const TraceRequest& request, std::vector<uint32_t>* out) {
  const int64_t full = std::min<int64_t>(request.input_tokens / kv::kBlockTokens,
                                         static_cast<int64_t>(request.hash_ids.size()) * blocks_per_id_);
  uint32_t parent = 0;
  for (int64_t b = 0; b < full; ++b) {
    const int64_t id = request.hash_ids[b / blocks_per_id_];
    const Key key{parent, static_cast<uint32_t>(b % blocks_per_id_), id};
    auto [it, inserted] = chain_.try_emplace(key, static_cast<uint32_t>(hashes_.size()));
    if (inserted) {
      const kv::BlockHash& prev = parent == 0 ? seed_ : hashes_[parent - 1];
      const int32_t tokens[3] = {static_cast<int32_t>(id & 0xffffffff), static_cast<int32_t>(id >> 32),
                                 static_cast<int32_t>(key.sub)};
      hashes_.push_back(kv::ChainBlock(prev, tokens));
    }
    out->push_back(it->second);
    parent = it->second + 1;
  }
}

base::Status AgentWorkload::Validate() const {
  if (sessions < 1 || turns < 1 || tenants < 1 || system_prompt_blocks < 0) {
    return base::MakeError(base::ErrorCode::kInvalidArgument, "workload: sessions, turns, tenants must be >= 1");
  }
  if (!(session_rate_per_s > 0) || !(decode_tokens_per_s > 0) || !(think_time_s >= 0) || !(first_user_tokens > 0) ||
      !(turn_user_tokens > 0) || !(output_tokens > 0)) {
    return base::MakeError(base::ErrorCode::kInvalidArgument, "workload: rates and token means must be > 0");
  }
  return base::Status::Ok();
}

std::vector<TraceRequest> GenerateAgentTrace(const AgentWorkload& w) {
  std::mt19937_64 rng(w.seed);
  int64_t next_id = 1;
  std::vector<std::vector<int64_t>> system_prompts(w.tenants);
  std::vector<double> tenant_weights;
  for (int t = 0; t < w.tenants; ++t) {
    std::uniform_real_distribution<double> scale(0.5, 1.5);
    const auto blocks = static_cast<int64_t>(std::llround(w.system_prompt_blocks * scale(rng)));
    for (int64_t b = 0; b < blocks; ++b) system_prompts[t].push_back(next_id++);
    tenant_weights.push_back(1.0 / (t + 1));
  }
  std::discrete_distribution<int> pick_tenant(tenant_weights.begin(), tenant_weights.end());
  std::exponential_distribution<double> gap(w.session_rate_per_s);
  std::uniform_int_distribution<int> num_turns((w.turns + 1) / 2, w.turns + w.turns / 2);
  std::vector<TraceRequest> out;
  double start = 0;
  for (int s = 0; s < w.sessions; ++s) {
    start += gap(rng);
    std::vector<int64_t> ids = system_prompts[pick_tenant(rng)];
    int64_t tokens = static_cast<int64_t>(ids.size()) * kv::kBlockTokens;
    int64_t prev_input = tokens;
    int64_t add = ExpTokens(rng, w.first_user_tokens, 16);
    double at = start;
    const int turns = num_turns(rng);
    for (int t = 0; t < turns; ++t) {
      // Blocks full in the previous prompt keep their ids; the rest is new content.
      ids.resize(static_cast<size_t>(prev_input / kv::kBlockTokens));
      tokens += add;
      while (static_cast<int64_t>(ids.size()) * kv::kBlockTokens < tokens) ids.push_back(next_id++);
      TraceRequest r;
      r.arrival_s = at;
      r.input_tokens = tokens;
      r.output_tokens = ExpTokens(rng, w.output_tokens, 16);
      r.hash_ids = ids;
      r.session = fmt::format("s{}", s);
      std::exponential_distribution<double> think(w.think_time_s > 0 ? 1.0 / w.think_time_s : 1e9);
      at += static_cast<double>(r.output_tokens) / w.decode_tokens_per_s + think(rng);
      prev_input = tokens;
      tokens += r.output_tokens;
      add = ExpTokens(rng, w.turn_user_tokens, 16);
      out.push_back(std::move(r));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

}  // namespace flashserve::router
