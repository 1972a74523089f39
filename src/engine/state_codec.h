// Byte serialisation of SequenceState for snapshots, the KV store and prefill->decode
// transfer. Entry vectors are stored losslessly in the most compact exact form: FP8 e4m3 with
// ue8m0 block scales for KV whose non-RoPE channels went through the FP8 QAT round trip, FP4
// e2m1 for QAT indexer keys, else raw f32 (each section is verified to decode bit-exactly
// before the compact form is chosen). A trailing checksum and structural checks against the
// model reject corrupt or foreign bytes with an error, never a crash. Pure functions.
#pragma once

#include <cstdint>
#include <memory>
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

std::string SerializeState(const SequenceState& state, const model::ModelConfig& config, const model::LayerPlan& plan,
                           StateSizes* sizes = nullptr);

base::Result<std::unique_ptr<SequenceState>> DeserializeState(std::string_view bytes, const model::ModelConfig& config,
                                                              const model::LayerPlan& plan);

}  // namespace flashserve::engine
