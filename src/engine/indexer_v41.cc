// V4.1 sparse indexer (engine/indexer_v41.h).
#include "engine/indexer_v41.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/norm_rope/norm_rope.h"
#include "kernels/quant/fake_quant.h"

namespace flashserve::engine {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Keep flags of the top `topk_blocks` blocks by max score, the newest block pinned.
void SelectBlocks(const float* scores, int64_t n, int block, int topk_blocks, uint8_t* keep) {
  const int64_t blocks = (n + block - 1) / block;
  thread_local std::vector<float> block_score;  // per-row scratch: this runs once per query row
  thread_local std::vector<int32_t> picked;
  block_score.assign(static_cast<size_t>(blocks), kMasked);
  for (int64_t e = 0; e < n; ++e) block_score[e / block] = std::max(block_score[e / block], scores[e]);
  block_score[blocks - 1] = std::numeric_limits<float>::infinity();
  TopKIndices(block_score.data(), blocks, topk_blocks, &picked);
  std::fill(keep, keep + blocks, uint8_t{0});
  for (int32_t b : picked) keep[b] = 1;
}

}  // namespace

void RunIndexerV41(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h,
                   const float* q_lat, EntrySelection* out, CandidateBlocks* candidates, IndexerScratch* s) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  const model::IndexerWeights& w = model.layer(layer).attn.indexer;
  const int64_t rows = batch.num_rows();
  const int heads = c.index_n_heads, dim = c.index_head_dim, ratio = spec.compress_ratio;
  const int block = c.candidate_block_size;

  auto visible = [&](int64_t r) { return (batch.pos[static_cast<size_t>(r)] + 1) / ratio; };
  if (spec.candidate_source) {
    candidates->offset.assign(static_cast<size_t>(rows) + 1, 0);
    for (int64_t r = 0; r < rows; ++r) candidates->offset[r + 1] = candidates->offset[r] + (visible(r) + block - 1) / block;
    candidates->keep.assign(static_cast<size_t>(candidates->offset[rows]), 1);
  }
  std::vector<std::vector<int32_t>> picks(static_cast<size_t>(rows));
  double scored = 0;
  for (int64_t r = 0; r < rows; ++r) scored += static_cast<double>(visible(r));
  ops.CountWork(2.0 * scored * heads * dim, scored * dim * sizeof(float));
  // Whether a row needs scores: more entries than the top-k, blocks to choose (candidate
  // source) or blocks pruned (later index sources). All grow with the position, so within a
  // sequence the rows that need scores are a suffix.
  auto needs_scores = [&](int64_t r) {
    const int64_t n = visible(r), blocks = (n + block - 1) / block;
    if (n > c.index_topk || (spec.candidate_source && blocks > c.candidate_topk_blocks)) return true;
    if (!spec.uses_candidates || n == 0) return false;
    const uint8_t* allowed = candidates->keep.data() + candidates->offset[r];
    return std::count(allowed, allowed + blocks, uint8_t{1}) < blocks;
  };
  // Rows that need no scores take every entry: a batch without any skips the query projections.
  bool any_scored = false;
  for (int64_t r = 0; r < rows && !any_scored; ++r) any_scored = needs_scores(r);
  if (any_scored) PrepareIndexerQueries(ops, c, w, batch, h, q_lat, /*hadamard=*/false, s);
  ForEachSequence(ops, batch, s, [&](size_t i, ScoreBuffers* buffers) {
    const SeqRows& seq = batch.seqs[i];
    int64_t first = seq.row_begin;
    for (; first < seq.row_end && !needs_scores(first); ++first) {
      picks[first].resize(static_cast<size_t>(visible(first)));
      std::iota(picks[first].begin(), picks[first].end(), 0);
    }
    if (first == seq.row_end) return;
    ForEachScoredRow(ops, heads, dim, seq.state->layer(spec.kv_source).index_keys.data(), first, seq.row_end, visible, *s,
                     buffers, [&](int64_t r, float* scores) {
        const int64_t n = visible(r), blocks = (n + block - 1) / block;
        if (spec.candidate_source && blocks > c.candidate_topk_blocks)
          SelectBlocks(scores, n, block, c.candidate_topk_blocks, candidates->keep.data() + candidates->offset[r]);
        if (spec.uses_candidates) {
          const uint8_t* allowed = candidates->keep.data() + candidates->offset[r];
          for (int64_t e = 0; e < n; ++e)
            if (!allowed[e / block]) scores[e] = kMasked;
        }
        std::vector<int32_t>& pick = picks[static_cast<size_t>(r)];
        TopKIndices(scores, n, std::min<int64_t>(n, c.index_topk), &pick);
        pick.erase(std::remove_if(pick.begin(), pick.end(), [&](int32_t e) { return scores[e] == kMasked; }),
                   pick.end());
      });
  });
  out->offset.assign(static_cast<size_t>(rows) + 1, 0);
  for (int64_t r = 0; r < rows; ++r) out->offset[r + 1] = out->offset[r] + static_cast<int64_t>(picks[r].size());
  out->index.resize(static_cast<size_t>(out->offset[rows]));
  for (int64_t r = 0; r < rows; ++r) std::copy(picks[r].begin(), picks[r].end(), out->index.begin() + out->offset[r]);
}

}  // namespace flashserve::engine
