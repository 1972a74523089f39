// Per-layer roles derived from the config (v4-architecture.md sections 2.3 and 5.1): attention
// type, compression ratio, which layer's compressed KV / top-k a layer reads (V4.1 shares them
// across layers), MoE routing kind, RoPE table, and the checkpoint name prefix.
// Pure data, immutable after BuildLayerPlan.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace flashserve::model {

// kCsa2: a V4.1 layer with a compressed branch (ratio 2 or 1), attending the top-k of its KV
// source's entries chosen by its index source.
enum class AttentionKind { kSliding, kCsa, kHca, kCsa2 };
enum class RopeTable { kMain, kCompress };

struct LayerSpec {
  int index = 0;              // 0..total_layers-1 (MTP layers follow the trunk)
  bool is_mtp = false;        // after the trunk (prefix mtp.K.): the MTP block or a DSpark stage
  int dspark_stage = -1;      // DSpark stage 0..S-1 (is_mtp too), -1 otherwise
  AttentionKind attention = AttentionKind::kSliding;
  int compress_ratio = 0;     // V4: 0, 4 or 128; V4.1: 0, 2 or 1
  // Compressed KV: the layer whose entries this layer attends (-1: none; V4: itself).
  int kv_source = -1;
  // Top-k: the layer whose indexer selection this layer uses (-1: all visible entries).
  int index_source = -1;
  bool owns_compressor = false;    // its state grows compressed entries (V4: ratio > 0)
  bool owns_index_keys = false;    // its state grows indexer keys (V4: CSA; V4.1: KV sources)
  bool index_compressor = false;   // V4 CSA: a second compressor makes the indexer keys
  bool compressor_overlap = false; // V4 CSA: overlapping windows (two halves per token)
  bool runs_indexer = false;       // scores and selects (index_source == index)
  bool candidate_source = false;   // V4.1: publishes the candidate block mask
  bool uses_candidates = false;    // V4.1: scores only inside the candidate blocks
  bool hash_moe = false;      // route by token id (tid2eid)
  RopeTable rope = RopeTable::kMain;
  std::string prefix;         // "layers.7." or "mtp.0."
};

using LayerPlan = std::vector<LayerSpec>;

LayerPlan BuildLayerPlan(const ModelConfig& config);
const char* AttentionKindName(AttentionKind kind);  // "SWA", "CSA", "HCA"

}  // namespace flashserve::model
