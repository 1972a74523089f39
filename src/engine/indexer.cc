// Lightning indexer (engine/indexer.h).
#include "engine/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/gemm/matmul.h"
#include "kernels/norm_rope/norm_rope.h"
#include "kernels/quant/fake_quant.h"

namespace flashserve::engine {
float IndexDot(const float* a, const float* b, int n, bool reference) {
  if (reference) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
    return static_cast<float>(acc);
  }
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

void TopKIndices(const float* scores, int64_t n, int64_t k, std::vector<int32_t>* out) {
  out->resize(static_cast<size_t>(n));
  std::iota(out->begin(), out->end(), 0);
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  if (k < n) {
    std::nth_element(out->begin(), out->begin() + k, out->end(), better);
    out->resize(static_cast<size_t>(k));
  }
  std::sort(out->begin(), out->end());
}

void PrepareIndexerQueries(Ops& ops, const model::ModelConfig& c, const model::IndexerWeights& w,
                           const RowBatch& batch, const float* h, const float* q_lat, bool hadamard,
                           IndexerScratch* s) {
  const int64_t rows = batch.num_rows();
  const int heads = c.index_n_heads, dim = c.index_head_dim, rope = c.rope_head_dim;
  s->q.resize(static_cast<size_t>(rows * heads * dim));
  s->weights.resize(static_cast<size_t>(rows * heads));
  ops.Linear(w.wq_b, q_lat, rows, c.q_lora_rank, s->q.data(), heads * dim);
  ops.Linear(w.weights_proj, h, rows, c.hidden_size, s->weights.data(), heads);
  const float weight_scale = 1.0f / std::sqrt(static_cast<float>(dim)) / std::sqrt(static_cast<float>(heads));
  const RowAngles& angles = batch.angles(/*compress=*/true);
  ops.ForRows(rows, [&](int64_t r) {
    for (int hd = 0; hd < heads; ++hd) {
      float* q = s->q.data() + (r * heads + hd) * dim;
      kernels::ApplyRope(q + dim - rope, rope / 2, angles.Cos(r), angles.Sin(r), false);
      if (ops.qat()) {
        if (hadamard) kernels::HadamardTransform(q, dim);
        kernels::FakeQuantFp4(q, dim, 32);
      }
    }
    for (int hd = 0; hd < heads; ++hd) s->weights[r * heads + hd] *= weight_scale;
  }, 4);
}

int64_t ScoreGroupRows(int heads, int64_t n_keys) {
  return std::max<int64_t>(1, (int64_t{1} << 23) / (static_cast<int64_t>(heads) * std::max<int64_t>(1, n_keys)));
}

void ScoreRows(Ops& ops, int heads, int dim, const float* keys, int64_t n_keys, int64_t r0, int64_t r1,
               const IndexerScratch& s, ScoreBuffers* b) {
  const int64_t rows = r1 - r0;
  b->dots.resize(static_cast<size_t>(rows * heads * n_keys));
  b->scores.resize(static_cast<size_t>(rows * n_keys));
  const float* q = s.q.data() + r0 * heads * dim;
  if (ops.reference()) {
    for (int64_t i = 0; i < rows * heads; ++i)
      for (int64_t e = 0; e < n_keys; ++e) b->dots[i * n_keys + e] = IndexDot(q + i * dim, keys + e * dim, dim, true);
  } else {
    model::Matrix k;
    k.format = model::MatrixFormat::kF32;
    k.rows = n_keys;
    k.cols = dim;
    k.data = reinterpret_cast<const uint8_t*>(keys);
    kernels::MatMul(k, q, rows * heads, dim, b->dots.data(), n_keys, ops.pool());
  }
  ops.ForRows(rows, [&](int64_t i) {
    const float* wts = s.weights.data() + (r0 + i) * heads;
    float* out = b->scores.data() + i * n_keys;
    std::fill(out, out + n_keys, 0.0f);
    for (int hd = 0; hd < heads; ++hd) {
      const float* dot = b->dots.data() + (i * heads + hd) * n_keys;
      for (int64_t e = 0; e < n_keys; ++e) out[e] += wts[hd] * std::max(0.0f, dot[e]);
    }
  }, 1);
}

void RunIndexer(Ops& ops, const model::ModelConfig& c, const model::IndexerWeights& w, int layer,
                const RowBatch& batch, const float* h, const float* q_lat, EntrySelection* out, IndexerScratch* s) {
  const int64_t rows = batch.num_rows();
  const int heads = c.index_n_heads, dim = c.index_head_dim;
  // Rows that see no more entries than the top-k select them all; queries only where one scores
  // (a batch of short sequences skips the indexer's projections).
  bool any_scored = false;
  for (int64_t r = 0; r < rows; ++r) any_scored |= (batch.pos[static_cast<size_t>(r)] + 1) / 4 > c.index_topk;
  if (any_scored) PrepareIndexerQueries(ops, c, w, batch, h, q_lat, /*hadamard=*/true, s);

  // The per-row selection sizes.
  out->offset.assign(static_cast<size_t>(rows) + 1, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t visible = (batch.pos[r] + 1) / 4;
    out->offset[r + 1] = out->offset[r] + std::min<int64_t>(visible, c.index_topk);
  }
  out->index.resize(static_cast<size_t>(out->offset[rows]));
  double scored = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t visible = (batch.pos[r] + 1) / 4;
    if (visible > c.index_topk) scored += static_cast<double>(visible);
  }
  ops.CountWork(2.0 * scored * heads * dim, scored * dim * sizeof(float));
  auto visible = [&](int64_t r) { return (batch.pos[static_cast<size_t>(r)] + 1) / 4; };
  ForEachSequence(ops, batch, s, [&](size_t i, ScoreBuffers* buffers) {
    const SeqRows& seq = batch.seqs[i];
    // Positions ascend, so the rows that prune (more entries than the top-k) are a suffix.
    int64_t first = seq.row_begin;
    for (; first < seq.row_end && visible(first) <= c.index_topk; ++first)
      std::iota(out->index.data() + out->offset[first], out->index.data() + out->offset[first + 1], 0);
    if (first == seq.row_end) return;
    ForEachScoredRow(ops, heads, dim, seq.state->layer(layer).index_keys.data(), first, seq.row_end, visible, *s,
                     buffers, [&](int64_t r, float* scores) {
                       thread_local std::vector<int32_t> picked;
                       TopKIndices(scores, visible(r), c.index_topk, &picked);
                       std::copy(picked.begin(), picked.end(), out->index.data() + out->offset[r]);
                     });
  });
}

}  // namespace flashserve::engine
