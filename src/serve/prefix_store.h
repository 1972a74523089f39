// The prefix cache as the engine loop uses it, over the tiered KV store: the L1 lookup the
// scheduler asks at admission (kv::ResumeIndex), restoring a state from cached blocks + a
// boundary snapshot, planning fetches of prefixes held only on disk or in the shared tier,
// persisting a state's blocks and boundary at a persist point, and exporting a prefix to another
// worker. What a prompt can resume from is kv's rule (kv/resume.h), applied here to the store.
// Bridges kvstore::KvStore (opaque payloads) and the engine's state codec. Engine thread only,
// except Seed, Hashes and Export (thread-safe; the store itself is thread-safe).
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
#include "kv/resume.h"
#include "kvstore/kv_store.h"
#include "serve/service.h"

namespace flashserve::serve {

// A longer prefix than L1 holds, available from outer tiers: what fetching it into L1 takes.
struct FetchPlan {
  kv::ResumePoint memory;                    // resumable from L1 now
  kv::ResumePoint any;                       // resumable from any tier
  std::vector<kvstore::ObjectKey> keys;      // objects of `any` not in L1
  std::vector<kvstore::ObjectKey> resident;  // those in L1: pinned while the rest is fetched
  std::vector<kvstore::Tier> block_tiers;    // tier of each block of `any`, before any fetch
};

// A restore's outcome: the state, or why there is none.
struct Restored {
  std::unique_ptr<engine::SequenceState> state;  // null: failed
  bool objects_gone = false;  // an object left L1 since the lookup (else: they do not assemble)
};

class PrefixStore final : public kv::ResumeIndex {
 public:
  // `store` must outlive this object.
  PrefixStore(const engine::Model& model, std::string fingerprint, kvstore::KvStore* store);

  // The hash seed of a cache namespace under this model (kv::HashSeed).
  kv::BlockHash Seed(const std::string& cache_namespace) const;
  // Block keys of the full blocks of tokens[0, min(size, limit)); `images` are the prompt's
  // pictures (their content keys go into the blocks that show them). Every method below takes
  // the same pair: a prompt is its tokens and its pictures.
  std::vector<kv::BlockHash> Hashes(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                                    std::span<const kv::ImageExtent> images, int64_t limit) const;

  // kv::ResumeIndex: the prefix of `tokens` restorable from L1, no I/O, nothing counted.
  kv::ResumePoint Lookup(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                         std::span<const kv::ImageExtent> images) const override;
  // Builds the state of tokens [0, 128 * blocks) from L1 (reads counted as L1 hits), with MTP
  // layers or without as asked (fresh ones where the storing worker had none); no state when
  // an object is gone or the payloads do not assemble (logged).
  Restored Restore(const kv::BlockHash& seed, std::span<const int32_t> tokens, std::span<const kv::ImageExtent> images,
                   int64_t blocks, bool with_mtp);
  // The longest resumable prefix in any tier (no I/O) and what fetching it into L1 needs. Counts
  // one L1 miss where the prompt's walk through L1 ends at a block L1 lacks.
  FetchPlan PlanFetch(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                      std::span<const kv::ImageExtent> images);
  // Bytes a fetch of `blocks` blocks and one boundary moves (estimate from stored sizes).
  int64_t EstimateFetchBytes(int64_t blocks) const;
  // Stores every not-yet-stored block of tokens [0, state.position()) and a boundary at the
  // state's position (a multiple of 128), retained under `ttl_class` (empty = default).
  void Persist(const kv::BlockHash& seed, std::span<const int32_t> tokens, std::span<const kv::ImageExtent> images,
               const engine::SequenceState& state, const std::string& ttl_class);
  // The objects that resume `prompt` at `upto_tokens` (a multiple of 128; -1 = the longest
  // prefix L1 holds, by kv's rule): blocks from_block..k-1 (the receiver has the ones before)
  // and the boundary after block k-1; empty when L1 lacks one of them.
  std::vector<CacheObject> Export(const kv::BlockHash& seed, std::span<const int32_t> prompt, int64_t from_block,
                                  int64_t upto_tokens) const;
  // Stores a received object in L1 (written through like a local one).
  void Import(const CacheObject& object);

  kvstore::KvStore& store() { return *store_; }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  std::optional<kvstore::Tier> InMemory(const kvstore::ObjectKey& key) const;

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
// The vision tower's fingerprint (hex; "" without a tower): its config and every `vision.*`,
// `aligner.*` and `image_*` tensor's name, type, shape and first and last bytes. Part of every
// picture's content key, so workers that load the same checkpoint from different paths agree.
std::string TowerFingerprint(const engine::Model& model);

}  // namespace flashserve::serve
