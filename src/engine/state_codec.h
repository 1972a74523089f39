// Byte serialisation of SequenceState for snapshots, the KV store and prefill->decode
// transfer. Entry vectors are stored losslessly in the most compact exact form: FP8 e4m3 with
// ue8m0 block scales for KV whose non-RoPE channels went through the FP8 QAT round trip (V4.1:
// all channels, blocks of 32), FP4 e2m1 for QAT indexer keys, FP4 with e4m3 scales for V4.1
// compressed KV, else raw f32 (each section is verified to decode bit-exactly before the
// compact form is chosen). A trailing checksum and structural checks against the
// model reject corrupt or foreign bytes with an error, never a crash. Pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "engine/state.h"
#include "model/config.h"
#include "model/layer_plan.h"

namespace flashserve::engine {

struct StateSizes {
  int64_t total = 0;
  int64_t rings = 0;        // raw windows needed to resume (last window-1 positions)
  int64_t carries = 0;      // compressor pools + MTP pending streams
  int64_t entries = 0;      // compressed entries + indexer keys
};

// Prefix-cache block size in tokens: a multiple of every compression ratio (4 and 128), so a
// block's compressed entries are complete and no compressor window straddles two blocks.
constexpr int64_t kBlockTokens = 128;

// The whole state (boundary + every block) in one byte string.
std::string SerializeState(const SequenceState& state, const model::ModelConfig& config, const model::LayerPlan& plan,
                           StateSizes* sizes = nullptr);
base::Result<std::unique_ptr<SequenceState>> DeserializeState(std::string_view bytes, const model::ModelConfig& config,
                                                              const model::LayerPlan& plan);

// Block k: the compressed entries (and indexer keys) produced by tokens [128k, 128k + 128) of
// every layer. Needs state.position() >= 128 (k + 1). Shared by every prefix containing it.
std::string SerializeBlock(const SequenceState& state, const model::ModelConfig& config, const model::LayerPlan& plan,
                           int64_t block_index);

// What a resume at state.position() needs besides the full blocks: rings, compressor
// carries, the entries of the unfinished block, MTP streams.
std::string SerializeBoundary(const SequenceState& state, const model::ModelConfig& config,
                              const model::LayerPlan& plan, StateSizes* sizes = nullptr);

// Rebuilds a state from a boundary and blocks 0 .. floor(P / 128) - 1, in order.
base::Result<std::unique_ptr<SequenceState>> AssembleState(std::string_view boundary,
                                                           std::span<const std::string_view> blocks,
                                                           const model::ModelConfig& config,
                                                           const model::LayerPlan& plan);

}  // namespace flashserve::engine
