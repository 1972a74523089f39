// The attention sublayer of every V4 layer type (v4-architecture.md section 4.3): query LoRA
// with per-head RMS and partial RoPE, the raw K=V window ring, the CSA/HCA compressors, the
// lightning indexer, sink attention over window + compressed keys, inverse RoPE and the
// grouped output projection. Updates each sequence's layer state. Engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/indexer.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "engine/row_batch.h"

namespace flashserve::engine {

struct AttentionScratch {
  std::vector<float> qa, q_lat, q, kv, o, z, compressor;
  std::vector<const float*> keys;
  std::vector<int64_t> key_offset;
  IndexerScratch indexer;
  EntrySelection selection;
};

// h: [rows, d] (already attn_norm'ed); out: [rows, d].
void RunAttention(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h, float* out,
                  AttentionScratch* s);

}  // namespace flashserve::engine
