// Writes a random-weight checkpoint in the official DeepSeek-V4 layout (config.json,
// safetensors with the official tensor names, FP8 128x128 tiles + FP4 experts, or BF16),
// sharded with an index when large. Deterministic for a seed (each tensor has its own
// stream), with weights scaled so activations stay in a realistic range through all layers.
// Used by `flashserve make-model` and by tests that need a model. Any thread.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "base/thread_pool.h"
#include "model/config.h"

namespace flashserve::model {

struct RandomCheckpointOptions {
  uint64_t seed = 1234;
  bool bf16 = false;            // all linears BF16 instead of FP8 dense + FP4 experts
  float sharp = 4.0f;           // std multiplier of the router, indexer weights and head
  uint64_t shard_bytes = 1ull << 30;  // start a new shard past this size
};

// Creates `dir` if needed and writes config.json, generation_config.json and the weights.
base::Status WriteRandomCheckpoint(ModelConfig config, const std::string& dir, const RandomCheckpointOptions& options,
                                   base::ThreadPool& pool);

}  // namespace flashserve::model
