// One transformer block over a row batch: attention site and FFN site, each wrapped in its
// hyper-connection pre/post (v4-architecture.md section 4.2). Engine thread.
#pragma once

#include <vector>

#include "engine/attention.h"
#include "engine/mhc.h"
#include "engine/model.h"
#include "engine/moe.h"
#include "engine/ops.h"
#include "engine/row_batch.h"

namespace flashserve::engine {

struct BlockScratch {
  HcMix mix;
  std::vector<float> u, h, y, mixes;
  AttentionScratch attention;
  MoeScratch moe;
};

// x: [rows, hc * d] residual streams, updated in place.
void RunBlock(Ops& ops, const Model& model, int layer, const RowBatch& batch, float* x, BlockScratch* s);

}  // namespace flashserve::engine
