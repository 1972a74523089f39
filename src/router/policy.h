// Routing policies and the Chooser that picks a worker for one request from the prompt's cached
// prefix on every worker (PrefixIndex) and their load (LoadView), or says "saturated" (429).
// Called by the router's routing thread and the route simulator. Not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "kv/block_hash.h"
#include "router/load_view.h"
#include "router/prefix_index.h"

namespace flashserve::router {

enum class Policy { kRoundRobin, kLeastLoad, kCacheAware };
base::Result<Policy> ParsePolicy(std::string_view name);  // "round-robin", "least-load", "cache-aware"
const char* PolicyName(Policy policy);

struct ChooserConfig {
  Policy policy = Policy::kCacheAware;
  // Cost = predicted time to first token on a worker (cache-aware; also reported by the others).
  double default_prefill_tokens_per_s = 10000;  // for a worker that has not measured its speed
  double disk_seconds_per_token = 3e-6;         // fetching a cached token from L2 (memory is free)
  double shared_seconds_per_token = 1.7e-5;     // ... from L3
  double boundary_fetch_tokens = 1000;          // a boundary snapshot fetches like this many tokens
  double decode_seconds_per_sequence = 0.002;   // TTFT added per running decode sequence
  // The choice minimizes TTFT + recompute_weight x this request's uncached prefill seconds: the
  // second term is the capacity a miss takes from everyone else. 0 = pure TTFT, which under load
  // moves sessions off busy workers, recomputing whole contexts and feeding the load that caused
  // the move (the "death spiral" of serving-anchors.md section 3).
  double recompute_weight = 1.0;
  // ... + busy_weight_tokens x the worker's recent busy fraction / its prefill speed: requests
  // stay with their worker, so a session placed on a busy worker meets that contention on every
  // later turn too. This spreads new sessions (and warms cold workers) while queues are short.
  // Off by default: with a handful of workers the busy fraction swings between 0 and 1 and the
  // term would pull sessions away from their caches; large fleets (the simulator's 1,000
  // workers) gain from ~200,000.
  double busy_weight_tokens = 0;
  // Workers within (1 + tie_tolerance) x best + tie_tolerance_s count as tied; the session key's
  // rendezvous hash picks among them.
  double tie_tolerance = 0.05;
  double tie_tolerance_s = 0.05;
  // Imbalance bound (load = queued prefill seconds = queued tokens / prefill speed, before this
  // request): only workers whose load is <= max(abs, rel x the least loaded candidate's) may be
  // chosen; the cheapest of them wins (reason kBalance when that is not the overall cheapest).
  double balance_abs_threshold_s = 30;
  double balance_rel_threshold = 2.0;
  // A worker with more queued prefill tokens than this takes nothing; when all are, 429.
  int64_t max_queued_prefill_tokens = int64_t{1} << 20;
  // Route remembers, per session key, where its last prompt went (two generations of at most
  // this many keys; 0 = off). A prompt extending that one credits that worker with it (in memory)
  // until the index shows it there: KV events lag routing by a whole prefill, and a session's next
  // turn can come sooner (tool calls), which would otherwise scatter the session.
  int64_t session_table_size = 1 << 16;
  int min_retry_after_s = 1;
  int max_retry_after_s = 60;
  int unhealthy_retry_after_s = 5;  // Retry-After when no worker is healthy

  base::Status Validate() const;
};

enum class Outcome { kRouted, kSaturated };
enum class Reason {
  kCost,             // cheapest predicted TTFT
  kAffinity,         // tied on cost; the session key's rendezvous hash picked it
  kBalance,          // the imbalance bound overrode the cheapest worker
  kRoundRobin,
  kLeastLoad,
  kNoHealthyWorker,  // saturated outcome
  kAllSaturated,     // saturated outcome
};
const char* ReasonName(Reason reason);

struct Decision {
  Outcome outcome = Outcome::kSaturated;
  Reason reason = Reason::kNoHealthyWorker;
  int worker = -1;
  double predicted_ttft_s = 0;
  int64_t cached_tokens = 0;
  int64_t cached_tokens_by_tier[kNumTiers] = {};
  int retry_after_s = 0;  // kSaturated: suggested Retry-After
};

// The cost model: predicted TTFT on a worker (match may be null = nothing cached).
struct TtftPrediction {
  double seconds = 0;
  double queue_seconds = 0;       // queued prefill before this request
  double uncached_seconds = 0;    // this request's own prefill
  double prefill_tokens_per_s = 0;  // the speed used
  double load_after_seconds = 0;  // queue + this request's uncached prefill
  int64_t cached_tokens = 0;
  int64_t cached_tokens_by_tier[kNumTiers] = {};
};
TtftPrediction PredictTtft(const ChooserConfig& config, const WorkerLoad& load, const WorkerMatch* match,
                           int64_t prompt_tokens);

// Rendezvous (highest random weight) hashing: stable under adding or removing workers.
uint64_t AffinityHash(std::string_view key);
uint64_t RendezvousScore(uint64_t key_hash, int worker);
// The candidate with the highest score for key; -1 when candidates is empty.
int RendezvousPick(std::string_view key, std::span<const int> candidates);
// The encode worker for a picture (key: AffinityHash of its source): the one rendezvous hashing
// prefers (whose encoder cache holds the picture), unless it has more than max_extra_queued
// pictures queued beyond the least loaded encoder's; then the least loaded (first on ties).
// encoders: non-empty, present in loads.
int PlacePicture(uint64_t key, std::span<const int> encoders, const LoadView& loads, int64_t max_extra_queued);

class Chooser {
 public:
  static base::Result<Chooser> Create(const ChooserConfig& config);
  explicit Chooser(const ChooserConfig& config);  // config must be valid (checked)

  // Picks a worker. matches: PrefixIndex::Match output (may be empty or shorter than the load
  // view: missing workers have nothing cached). affinity_key: session id or "" (none).
  Decision Choose(int64_t prompt_tokens, std::string_view affinity_key, std::span<const WorkerMatch> matches,
                  const LoadView& loads);
  // Match (only for kCacheAware) + the session table + Choose: the whole routing decision.
  Decision Route(std::span<const kv::BlockHash> prompt_blocks, int64_t prompt_tokens, std::string_view affinity_key,
                 const PrefixIndex& index, const LoadView& loads);

  const ChooserConfig& config() const { return config_; }

 private:
  struct Candidate {
    int worker;
    TtftPrediction prediction;
    double score;  // what the cost policy minimizes (see recompute_weight)
  };
  // Fills candidates_ with the healthy, unsaturated workers; false (and *saturated) when none.
  bool Gather(int64_t prompt_tokens, std::span<const WorkerMatch> matches, const LoadView& loads,
              Decision* saturated);
  Decision ByCost(std::string_view affinity_key, bool opaque);
  Decision ByRoundRobin();
  Decision ByLeastLoad();
  Decision Routed(const Candidate& c, Reason reason) const;

  struct SessionRoute {
    int worker;
    int64_t blocks;      // full blocks of the prompt sent there
    kv::BlockHash last;  // hash of its last block (chained: names the whole prefix)
    bool confirmed;      // the index has shown that prefix on the worker since
  };
  // Credits the worker the session's last prompt went to (see session_table_size).
  void ApplySessionCredit(uint64_t key_hash, std::span<const kv::BlockHash> prompt_blocks);
  void RememberSession(uint64_t key_hash, int worker, std::span<const kv::BlockHash> prompt_blocks);

  ChooserConfig config_;
  size_t cursor_ = 0;  // rotation for round-robin and for exact ties
  std::unordered_map<uint64_t, SessionRoute> sessions_, old_sessions_;
  std::vector<Candidate> candidates_;
  std::vector<WorkerMatch> matches_;
};

}  // namespace flashserve::router
