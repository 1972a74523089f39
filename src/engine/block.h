// One transformer block over a row batch: attention site and FFN site, each wrapped in its
// hyper-connection pre/post (v4-architecture.md section 4.2; V4.1's lagged pre, section 5.3).
// Engine thread.
#pragma once

#include <vector>

#include "base/aligned_vector.h"
#include "engine/attention.h"
#include "engine/engram.h"
#include "engine/mhc.h"
#include "engine/model.h"
#include "engine/moe.h"
#include "engine/ops.h"
#include "engine/row_batch.h"

namespace flashserve::engine {

struct BlockScratch {
  HcMix mix;
  // V4.1 single-pass mHC: the pre weights the next site collapses with ([rows * hc]); the
  // engine sets them to one-hot (stream 0) before layer 0 and reads them after the last layer.
  std::vector<float> lagged_pre;
  base::AlignedVector<float> u, h, y, mixes;
  AttentionScratch attention;
  MoeScratch moe;
  EngramScratch engram;
};

// x: [rows, hc * d] residual streams, updated in place.
void RunBlock(Ops& ops, const Model& model, int layer, const RowBatch& batch, float* x, BlockScratch* s);

}  // namespace flashserve::engine
