// The MoE feed-forward (v4-architecture.md section 4.4): sqrt-softplus router with hash
// (tid2eid) or score top-k selection (bias only for selection), renormalised and scaled
// routing weights, clamped SwiGLU experts, and the shared expert. Tokens are grouped by
// expert so each expert's weights are read once per call; each token's output is summed in
// its own fixed slot order (batch invariant). Engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "engine/ops.h"
#include "model/config.h"
#include "model/weights.h"

namespace flashserve::engine {

struct MoeScratch {
  base::AlignedVector<float> logits, weights, expert_out, shared;
  base::AlignedVector<float> rounded;  // the MoE input rounded to FP8 once for every expert (QAT)
  std::vector<int32_t> selected;
  std::vector<std::vector<int64_t>> assignments;  // per expert: row * k + slot
};

// Routing for one row: expert ids and weights (k each) from the router logits.
void RouteRow(const model::ModelConfig& config, const model::MoeWeights& w, bool hash, int32_t token_id,
              const float* logits, int32_t* experts, float* weights);

// h: [rows, d] (ffn_norm'ed); ids: token id per row (hash routing); out: [rows, d].
void RunMoe(Ops& ops, const model::ModelConfig& config, const model::MoeWeights& w, bool hash, const int32_t* ids,
            const float* h, int64_t rows, float* out, MoeScratch* s);

}  // namespace flashserve::engine
