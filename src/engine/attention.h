// The attention sublayer of every V4 / V4.1 layer type (v4-architecture.md sections 4.3, 5.1,
// 5.2): query LoRA with per-head RMS and partial RoPE, the raw K=V window ring, the CSA/HCA
// compressors (V4.1: the KV-source compressor), the lightning indexer, sink attention over
// window + compressed keys (V4.1: another layer's entries and top-k), inverse RoPE and the
// grouped output projection. Updates each sequence's layer state. Engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/aligned_vector.h"
#include "engine/indexer.h"
#include "engine/indexer_v41.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "engine/row_batch.h"

namespace flashserve::engine {

struct AttentionScratch {
  base::AlignedVector<float> qa, q_lat, q, kv, o, z, compressor;
  std::vector<const float*> keys;
  std::vector<int64_t> key_offset;
  IndexerScratch indexer;
  // Top-k of every index-source layer in the current forward, by layer (V4.1 layers reuse
  // their index source's selection).
  std::vector<EntrySelection> selections;
  CandidateBlocks candidates;  // V4.1: published by the candidate-source layer
};

// h: [rows, d] (already attn_norm'ed); out: [rows, d].
void RunAttention(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h, float* out,
                  AttentionScratch* s);

// KV injection (a DSpark stage's context): the layer's raw-window kv of h ([rows, d] for every row
// of the batch; no query, no attention) written into the rings of `seqs` (some of the batch's
// sequences) at their rows' positions, logged in their undo logs like a forward's.
void InjectKv(Ops& ops, const Model& model, int layer, const RowBatch& batch, std::span<const SeqRows> seqs,
              const float* h, AttentionScratch* s);

// Takes a layer's state back to its value after the positions below `limit` of a logged call:
// ring rows the call wrote from `limit` on get their old rows back, the carries are replayed
// and the entries the rejected rows completed are dropped.
void RollbackLayer(const Model& model, int layer, const LayerUndo& undo, int64_t limit, LayerState* ls);

}  // namespace flashserve::engine
