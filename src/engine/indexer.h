// Lightning indexer of CSA layers (v4-architecture.md section 4.3.d): per query row, scores
// every visible compressed entry with sum_h w_h * ReLU(q_h . K_w) and keeps the top-k.
// Ties are broken by the lower entry index, so selection is deterministic. Engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "engine/ops.h"
#include "engine/row_batch.h"
#include "model/config.h"
#include "model/weights.h"

namespace flashserve::engine {

// Selected entry indices of every row, ascending, in CSR form.
struct EntrySelection {
  std::vector<int32_t> index;
  std::vector<int64_t> offset;  // rows + 1
  const int32_t* begin(int64_t row) const { return index.data() + offset[static_cast<size_t>(row)]; }
  int64_t size(int64_t row) const { return offset[static_cast<size_t>(row) + 1] - offset[static_cast<size_t>(row)]; }
};

// One scoring call's buffers (a thread's own where sequences score side by side).
struct ScoreBuffers {
  base::AlignedVector<float> scores, dots;
};

struct IndexerScratch {
  base::AlignedVector<float> q, weights;
  ScoreBuffers buffers;  // for sequences scored on the calling thread
};

// s->q = FP4-QAT(Hadamard?(RoPE_compress(wq_b q_lat))) per head and s->weights =
// weights_proj(h) * D_I^-0.5 * H_I^-0.5 for every row (V4: Hadamard; V4.1: none).
void PrepareIndexerQueries(Ops& ops, const model::ModelConfig& config, const model::IndexerWeights& w,
                           const RowBatch& batch, const float* h, const float* q_lat, bool hadamard,
                           IndexerScratch* s);

// Index scores of query rows [r0, r1) (s.q / s.weights as PrepareIndexerQueries left them)
// against keys [0, n_keys): b->scores[(r - r0) * n_keys + e] = sum_h w_h * ReLU(q_h . K_e).
// The dots come from the GEMM kernel (one reduction order per dot, whatever the rows, keys or
// threads; fp64 on the reference path), so scores do not depend on batching or chunking.
void ScoreRows(Ops& ops, int heads, int dim, const float* keys, int64_t n_keys, int64_t r0, int64_t r1,
               const IndexerScratch& s, ScoreBuffers* b);
// Rows per ScoreRows call that keep its buffers near 32 MB.
int64_t ScoreGroupRows(int heads, int64_t n_keys);

// Scores rows [first, end) of one sequence (visible(r) keys each, non-decreasing) in groups and
// calls row_fn(r, scores) for every row on the pool; scores[0, visible(r)) are that row's
// (writable: the scratch slice of that row).
template <typename VisibleFn, typename RowFn>
void ForEachScoredRow(Ops& ops, int heads, int dim, const float* keys, int64_t first, int64_t end,
                      const VisibleFn& visible, const IndexerScratch& s, ScoreBuffers* b, const RowFn& row_fn) {
  const int64_t group = ScoreGroupRows(heads, visible(end - 1));
  for (int64_t g0 = first; g0 < end; g0 += group) {
    const int64_t g1 = std::min(end, g0 + group), n_keys = visible(g1 - 1);
    ScoreRows(ops, heads, dim, keys, n_keys, g0, g1, s, b);
    ops.ForRows(g1 - g0, [&](int64_t i) { row_fn(g0 + i, b->scores.data() + i * n_keys); }, 1);
  }
}

// Calls seq_fn(i, buffers) for every sequence i of the batch: those with at least kRows rows
// (prefill chunks, whose own loops use the pool) one after another with s->buffers, the others
// (decoding sequences) side by side, each task with its thread's own buffers. seq_fn must
// write only its sequence's rows.
template <typename SeqFn>
void ForEachSequence(Ops& ops, const RowBatch& batch, IndexerScratch* s, const SeqFn& seq_fn) {
  constexpr int64_t kRows = 8;
  std::vector<size_t> short_seqs;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (batch.seqs[i].row_end - batch.seqs[i].row_begin >= kRows) {
      seq_fn(i, &s->buffers);
    } else {
      short_seqs.push_back(i);
    }
  }
  ops.ForTasks(static_cast<int64_t>(short_seqs.size()), [&](int64_t t) {
    thread_local ScoreBuffers buffers;
    seq_fn(short_seqs[static_cast<size_t>(t)], &buffers);
  });
}

// q_lat: [rows, q_lora_rank]; h: [rows, d]. Index keys must already hold every entry visible
// to the batch's rows (layer `layer` of each sequence state).
void RunIndexer(Ops& ops, const model::ModelConfig& config, const model::IndexerWeights& w, int layer,
                const RowBatch& batch, const float* h, const float* q_lat, EntrySelection* out, IndexerScratch* s);

// q . k in a fixed summation order (16 lanes, then a fixed tree); fp64 on the reference path.
float IndexDot(const float* a, const float* b, int n, bool reference);

// Top-k of scores[0, n) by (score desc, index asc), returned ascending by index.
void TopKIndices(const float* scores, int64_t n, int64_t k, std::vector<int32_t>* out);

}  // namespace flashserve::engine
