// The prefix cache as the serving loop uses it: block keys per sequence (chained hashes under
// the tenant's namespace), probing and restoring a sequence state from cached blocks + a
// boundary snapshot, and persisting a state's blocks and boundary at a persist point.
// Bridges kv::PrefixCache (opaque payloads) and the engine's state codec. Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/state.h"
#include "kv/block_hash.h"
#include "kv/prefix_cache.h"

namespace flashserve::serve {

class PrefixStore {
 public:
  PrefixStore(const engine::Model& model, std::string fingerprint, int64_t capacity_bytes);

  // Tokens of `tokens` restorable from the cache (a multiple of 128), remembering the match
  // for Restore. `limit` caps it (the last prompt token must be computed).
  int64_t Probe(const std::string& cache_namespace, std::span<const int32_t> tokens, int64_t limit,
                kv::PrefixMatch* match);
  // Builds the state from a probed match; null when the payloads do not assemble.
  std::unique_ptr<engine::SequenceState> Restore(const kv::PrefixMatch& match, bool with_mtp);
  // Stores every not-yet-cached block of tokens [0, state.position()) and a boundary at the
  // state's position (which must be a multiple of 128).
  void Persist(const std::string& cache_namespace, std::span<const int32_t> tokens, const engine::SequenceState& state);

  const kv::PrefixCache& cache() const { return cache_; }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  const engine::Model& model_;
  std::string fingerprint_;
  kv::PrefixCache cache_;
};

// A digest of everything that makes cached state valid: config, tensor names/dtypes/shapes,
// sampled tensor bytes, the engine's numerics options and the state format version.
std::string ModelFingerprint(const engine::Model& model, bool qat);

}  // namespace flashserve::serve
