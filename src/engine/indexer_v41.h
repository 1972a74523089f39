// V4.1 sparse indexer of an index-source layer (v4-architecture.md sections 5.1-5.2): queries
// from q_lat through wq_b (compress RoPE, FP4 block 32) score the indexer keys published by the
// layer's KV source; the candidate-source layer also publishes, per query, the top candidate
// blocks (block score = max over `candidate_block_size` entries, the block holding the newest
// visible entry always kept), and later index sources score only inside those blocks. Ties are
// broken by the lower index, so selection is deterministic. Engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/indexer.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "engine/row_batch.h"

namespace flashserve::engine {

// Per query row: one keep flag per candidate block of its visible entries (CSR).
struct CandidateBlocks {
  std::vector<uint8_t> keep;
  std::vector<int64_t> offset;  // rows + 1
};

// Writes the selection of index-source layer `layer` into *out; reads / writes *candidates.
void RunIndexerV41(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h,
                   const float* q_lat, EntrySelection* out, CandidateBlocks* candidates, IndexerScratch* s);

}  // namespace flashserve::engine
