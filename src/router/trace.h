// Request traces for the route simulator: interning of Mooncake-style traces' block-id chains
// (protocol/trace.h) into kv::BlockHash keys, and a synthetic multi-turn agent workload.
// Plain data and pure functions; BlockTable is single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "kv/block_hash.h"
#include "protocol/trace.h"

namespace flashserve::router {

// The record and its JSON-lines codec live in protocol (shared with loadgen's trace replay).
using protocol::FormatTrace;
using protocol::ParseTrace;
using protocol::ReadTrace;
using protocol::TraceRequest;
using protocol::WriteTrace;

// Interns prompt block chains: id k of a request becomes H_k = ChainBlock(H_{k-1}, id as tokens),
// the way real prompts chain, under HashSeed("route-sim", ""); each distinct chain position gets a
// dense number. With tokens_per_id = 512 (Mooncake's traces) one id stands for four 128-token blocks.
class BlockTable {
 public:
  explicit BlockTable(int64_t tokens_per_id = kv::kBlockTokens);
  // Appends the dense numbers of the request's full 128-token prompt blocks to *out.
  void Intern(const TraceRequest& request, std::vector<uint32_t>* out);
  const kv::BlockHash& hash(uint32_t dense) const { return hashes_[dense]; }
  size_t size() const { return hashes_.size(); }

 private:
  struct Key {
    uint32_t parent;  // dense number + 1; 0 = the seed
    uint32_t sub;     // 128-token block within the id
    int64_t id;
    bool operator==(const Key&) const = default;
  };
  struct KeyHasher {
    size_t operator()(const Key& k) const;
  };
  int64_t blocks_per_id_;
  kv::BlockHash seed_;
  std::unordered_map<Key, uint32_t, KeyHasher> chain_;
  std::vector<kv::BlockHash> hashes_;
};

// Multi-turn agent sessions: each picks a tenant (skewed: tenant t with weight 1/(t+1)) whose
// system prompt (whole blocks) it starts with, then turns whose prompt is the previous prompt +
// the previous answer + a new user/tool message. Sessions start as a Poisson process; a turn
// follows the previous one after its answer (output / decode speed) and a think time.
struct AgentWorkload {
  int sessions = 40;
  int turns = 6;                      // per session: uniform in [ceil(turns/2), turns + turns/2]
  int tenants = 4;
  int system_prompt_blocks = 32;      // mean; tenant prompts are 0.5x..1.5x of it
  double session_rate_per_s = 2;      // Poisson session starts
  double think_time_s = 3;            // mean (exponential)
  double decode_tokens_per_s = 50;    // places the next turn after the previous answer
  double first_user_tokens = 1500;    // mean (exponential, at least 16) of the first message
  double turn_user_tokens = 1500;     // mean of each later message (tool output, user turn)
  double output_tokens = 400;         // mean per answer
  uint64_t seed = 1;

  base::Status Validate() const;
};
// Sorted by arrival; sessions are named "s<index>". Deterministic for a seed.
std::vector<TraceRequest> GenerateAgentTrace(const AgentWorkload& workload);

}  // namespace flashserve::router
