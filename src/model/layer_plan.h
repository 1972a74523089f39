// Per-layer roles derived from the config (v4-architecture.md section 2.3): attention type,
// compression ratio, MoE routing kind, RoPE table, and the checkpoint name prefix.
// Pure data, immutable after BuildLayerPlan.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace flashserve::model {

enum class AttentionKind { kSliding, kCsa, kHca };
enum class RopeTable { kMain, kCompress };

struct LayerSpec {
  int index = 0;              // 0..total_layers-1 (MTP layers follow the trunk)
  bool is_mtp = false;
  AttentionKind attention = AttentionKind::kSliding;
  int compress_ratio = 0;     // 0, 4 or 128
  bool hash_moe = false;      // route by token id (tid2eid)
  RopeTable rope = RopeTable::kMain;
  std::string prefix;         // "layers.7." or "mtp.0."
};

using LayerPlan = std::vector<LayerSpec>;

LayerPlan BuildLayerPlan(const ModelConfig& config);
const char* AttentionKindName(AttentionKind kind);  // "SWA", "CSA", "HCA"

}  // namespace flashserve::model
