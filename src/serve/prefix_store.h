// The prefix cache as the serving loop uses it, over the tiered KV store: block keys per
// sequence (chained hashes under the tenant's namespace), probing L1 and restoring a state
// from cached blocks + a boundary snapshot, planning fetches of prefixes held only on disk
// or in the shared tier, and persisting a state's blocks and boundary at a persist point.
// Bridges kvstore::KvStore (opaque payloads) and the engine's state codec. Engine thread only
// (the store itself is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/options.h"
#include "engine/state.h"
#include "kv/block_hash.h"
#include "kvstore/kv_store.h"

namespace flashserve::serve {

// A prefix restorable from L1: its blocks and the boundary snapshot after them.
struct PrefixMatch {
  int64_t num_blocks = 0;
  std::vector<kvstore::Payload> blocks;
  kvstore::Payload boundary;
};

// A longer prefix than L1 has, held in outer tiers: what to fetch to get it.
struct FetchPlan {
  int64_t memory_blocks = 0;               // usable prefix in L1 now
  int64_t total_blocks = 0;                // usable prefix in any tier
  std::vector<kvstore::ObjectKey> keys;    // objects of the longer prefix not in L1
  std::vector<kvstore::ObjectKey> resident;  // those in L1: pin them while the rest is fetched
  std::vector<kvstore::Tier> block_tiers;  // tier of each block 0 .. total_blocks - 1
  kvstore::Tier slowest = kvstore::Tier::kMemory;
};

class PrefixStore {
 public:
  // `store` must outlive this object.
  PrefixStore(const engine::Model& model, std::string fingerprint, kvstore::KvStore* store);

  // Tokens of `tokens` restorable from L1 (a multiple of 128, at most `limit`), with the match.
  int64_t Probe(const std::string& cache_namespace, std::span<const int32_t> tokens, int64_t limit, PrefixMatch* match);
  // Builds the state from a probed match; null when the payloads do not assemble.
  std::unique_ptr<engine::SequenceState> Restore(const PrefixMatch& match, bool with_mtp);
  // The longest usable prefix in any tier (no I/O) and what fetching it into L1 needs.
  FetchPlan PlanFetch(const std::string& cache_namespace, std::span<const int32_t> tokens, int64_t limit) const;
  // Bytes a fetch of `blocks` blocks and one boundary moves (estimate from stored sizes).
  int64_t EstimateFetchBytes(int64_t blocks) const;
  // Stores every not-yet-stored block of tokens [0, state.position()) and a boundary at the
  // state's position (a multiple of 128), retained under `ttl_class` (empty = default).
  void Persist(const std::string& cache_namespace, std::span<const int32_t> tokens, const engine::SequenceState& state,
               const std::string& ttl_class);

  kvstore::KvStore& store() { return *store_; }
  const std::string& fingerprint() const { return fingerprint_; }
  // Block keys of the full blocks of tokens[0, min(size, limit)). Thread-safe.
  std::vector<kv::BlockHash> Hashes(const std::string& ns, std::span<const int32_t> tokens, int64_t limit) const;

 private:

  const engine::Model& model_;
  std::string fingerprint_;
  kvstore::KvStore* store_;
  int64_t stored_block_bytes_ = 0, stored_blocks_ = 0;        // running size averages
  int64_t stored_boundary_bytes_ = 0, stored_boundaries_ = 0;
};

// A digest of everything that makes cached state valid: config, tensor names/dtypes/shapes,
// sampled tensor bytes, the engine's numerics (QAT; the reference kernels or which bits the
// optimized ones give here, kernels::NumericsName), the state format version and, from
// version 2 on, the store's object format version (kvstore::kObjectFormatVersion). Hosts whose
// numerics differ (AVX2 and AVX-512, AMX on and off) keep separate objects in a shared
// directory: a state restored there continues exactly as a cold prefill would.
std::string ModelFingerprint(const engine::Model& model, const engine::EngineOptions& options);

}  // namespace flashserve::serve
