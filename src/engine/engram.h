// V4.1 Engram (v4-architecture.md section 5.4): before an Engram layer's block, each row hashes
// the n-grams ending at its token (compressed token ids, the pad's id before the sequence
// start), gathers those rows of the layer's table from the mapped checkpoint, projects them to
// one key per stream and a shared value, and adds the value to every stream through a gate
// sigmoid(signed_sqrt(<X_i * w_i, key_i> * rstd(X_i) * rstd(key_i) / sqrt(d))). Engine thread.
#pragma once

#include <vector>

#include "base/aligned_vector.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "engine/row_batch.h"

namespace flashserve::engine {

struct EngramScratch {
  std::vector<int64_t> rows;  // [rows * columns] table row ids
  base::AlignedVector<float> gathered, kv;
};

// x: [rows, hc * d] residual streams of the batch, updated in place.
void RunEngram(Ops& ops, const Model& model, int layer, const RowBatch& batch, float* x, EngramScratch* s);

}  // namespace flashserve::engine
