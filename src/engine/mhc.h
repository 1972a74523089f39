// Manifold-constrained hyper-connections (v4-architecture.md sections 4.2 and 4.5): the pre
// weights / post gates / Sinkhorn-normalised combination of each block site, the stream
// collapse before a sublayer, the expansion after it, and the output-head collapse.
// Engine thread; per-row work runs on the Ops pool.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "engine/ops.h"
#include "model/config.h"
#include "model/weights.h"

namespace flashserve::engine {

struct HcMix {
  std::vector<float> pre;   // [rows * hc]
  std::vector<float> post;  // [rows * hc]
  std::vector<float> comb;  // [rows * hc * hc], comb[i][j] row-major
};

// For each of `rows` rows of X ([rows, hc*d]): computes the site's pre/post/comb and the
// sublayer input u[row] = sum_i w_i * X_i ([rows, d]), where w is the site's own pre (V4) or,
// when collapse_pre is given ([rows * hc]), those weights (V4.1's single-pass mHC collapses
// with the previous site's pre; v4-architecture.md section 5.3).
void HcPre(Ops& ops, const model::ModelConfig& config, const model::HcWeights& w, const float* x, int64_t rows,
           HcMix* mix, float* u, base::AlignedVector<float>* scratch, const float* collapse_pre = nullptr);

// out[row] = sum_i weights[row * hc + i] * X_i (V4.1's final collapse before the norm).
void HcCollapse(Ops& ops, const model::ModelConfig& config, const float* x, const float* weights, int64_t rows,
                float* out);

// X_j <- post_j * y + sum_i comb[i][j] * X_i (comb applied transposed), in place.
void HcPost(Ops& ops, const model::ModelConfig& config, const HcMix& mix, const float* y, int64_t rows, float* x);

// Output-head collapse: out[row] = sum_i (sigmoid(m_i * scale + base_i) + hc_eps) * X_i.
void HcHead(Ops& ops, const model::ModelConfig& config, const model::HcWeights& w, const float* x, int64_t rows,
            float* out, base::AlignedVector<float>* scratch);

// Sinkhorn normalisation of one hc x hc matrix in place (row softmax, then alternating
// column/row normalisations; `iters` column passes in total).
void Sinkhorn(float* c, int hc, int iters, float eps);

}  // namespace flashserve::engine
