// V4.1 KV-source compressor (v4-architecture.md section 5.2): pools `ratio` tokens (2: gated
// per-channel softmax without `ape` or overlap; 1: one entry per token) into a latent, norms it,
// derives the indexer key from the pre-RoPE latent (wk + k_norm, RoPE at the entry position,
// FP4 block 32 ue8m0), and stores the RoPE'd latent as the shared compressed entry (FP4 block 16
// with e4m3 scales). Appends to the KV source's layer state. Engine thread.
#pragma once

#include <vector>

#include "base/aligned_vector.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "engine/row_batch.h"
#include "engine/undo.h"

namespace flashserve::engine {

// h: [rows, d] (attn_norm'ed input of KV-source layer `layer`).
void RunCompressorV41(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h,
                      base::AlignedVector<float>* scratch);

// The carry after the logged rows below `limit` (engine/compressor.h ReplayFolds, V4.1's fold);
// returns the latents they completed.
int64_t ReplayFoldsV41(int ratio, int dim, const FoldLog& log, int64_t limit, CompressorState* state);

}  // namespace flashserve::engine
