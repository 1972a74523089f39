// Block-chain interning and the synthetic agent workload (router/trace.h).
#include "router/trace.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "fmt/format.h"

namespace flashserve::router {
namespace {

// Exponential with the given mean, at least `floor`, rounded to whole tokens.
int64_t ExpTokens(std::mt19937_64& rng, double mean, int64_t floor) {
  std::exponential_distribution<double> d(1.0 / mean);
  return std::max<int64_t>(floor, static_cast<int64_t>(std::llround(d(rng))));
}

}  // namespace

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
