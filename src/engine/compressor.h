// KV compressors (v4-architecture.md section 4.3.c): gated per-channel softmax pooling of
// `ratio` consecutive tokens (CSA ratio 4 with overlapping windows, HCA ratio 128), then
// RMSNorm, RoPE at the window start and the QAT round trip. Appends finished entries to the
// sequence's layer state. Engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/aligned_vector.h"
#include "engine/ops.h"
#include "engine/row_batch.h"
#include "engine/undo.h"
#include "kernels/norm_rope/norm_rope.h"
#include "model/weights.h"

namespace flashserve::engine {

enum class EntryQuant { kFp8Nope, kHadamardFp4 };  // main KV vs indexer keys

struct CompressorSpec {
  const model::CompressorWeights* weights = nullptr;
  int ratio = 0;
  int dim = 0;        // entry width (D or D_I)
  int rope_dim = 0;   // trailing RoPE channels
  bool overlap = false;
  EntryQuant quant = EntryQuant::kFp8Nope;
  float norm_eps = 1e-6f;
  const kernels::RopeTable* rope = nullptr;
};

// Where a sequence's compressor carry and entries ([n, dim] floats) live.
struct CompressorTarget {
  CompressorState* state;
  base::AlignedVector<float>* entries;
  FoldLog* log = nullptr;  // where the sequence's rows are kept for a rollback (null: not kept)
};
using SelectTarget = std::function<CompressorTarget(const SeqRows&)>;

// Projects h ([rows, d]) and folds every row into its sequence's compressor state in row
// (= position) order, appending each completed entry. Sequences, and channel slices of those
// with many rows, fold side by side on the pool; the result does not depend on it.
void RunCompressor(Ops& ops, const CompressorSpec& spec, const RowBatch& batch, const float* h, int64_t d,
                   const SelectTarget& select, base::AlignedVector<float>* scratch);

// Takes `state` back to the carry after the logged rows at positions below `limit` (the log's
// start, then those rows folded again in the same order: bit-identical to a call that read only
// them). Returns the number of entries those rows completed.
int64_t ReplayFolds(const CompressorSpec& spec, const FoldLog& log, int64_t limit, CompressorState* state);

// Post-processing of a pooled entry of window w: norm, RoPE at ratio * w, QAT.
void FinishEntry(Ops& ops, const CompressorSpec& spec, int64_t window_index, float* entry);

}  // namespace flashserve::engine
