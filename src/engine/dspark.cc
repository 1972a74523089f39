// The DSpark drafter (v4-architecture.md 4.7, api-and-decoding.md 3.3), part of Engine: inside
// Forward, the mean residual streams entering the target layers, projected by main_proj and
// main_norm, become every stage's context KV (injected into its window ring, no query); a draft
// runs one block [anchor, noise x (B - 1)] through the stages (bidirectional within the block),
// then the head plus the Markov head's bias left to right, with the confidence head's estimate
// per draft. The Engine's thread, like Forward.
#include <cmath>
#include <cstring>

#include "engine/attention.h"
#include "engine/engine.h"
#include "kernels/gemm/matmul.h"

namespace flashserve::engine {

void Engine::CaptureDsparkFeatures(int slot, const RowBatch& rows, const float* x) {
  const model::ModelConfig& c = model_.config();
  const int64_t d = c.hidden_size, width = c.hc_dim(), stride = c.dspark.stages() * d;
  const int hc = c.hc_mult;
  dspark_features_.resize(static_cast<size_t>(rows.num_rows() * stride));
  Ops::ScopedPhase t(ops_, Phase::kMtp);
  ops_.ForRows(rows.num_rows(), [&](int64_t r) {
    const float* streams = x + r * width;
    float* out = dspark_features_.data() + r * stride + slot * d;
    for (int64_t k = 0; k < d; ++k) {
      float sum = 0.0f;
      for (int i = 0; i < hc; ++i) sum += streams[i * d + k];
      out[k] = sum / static_cast<float>(hc);
    }
  }, 16);
}

void Engine::InjectDsparkContext(const RowBatch& rows) {
  const model::ModelConfig& c = model_.config();
  std::vector<SeqRows> drafting;  // the sequences that keep DSpark state
  for (const SeqRows& seq : rows.seqs)
    if (seq.state->with_mtp()) drafting.push_back(seq);
  if (drafting.empty()) return;
  const int64_t d = c.hidden_size, n = rows.num_rows();
  const model::DsparkWeights& w = model_.weights().dspark;
  dspark_context_.resize(static_cast<size_t>(n * d));
  {
    Ops::ScopedPhase t(ops_, Phase::kMtp);
    ops_.Linear(w.main_proj, dspark_features_.data(), n, c.dspark.stages() * d, dspark_context_.data(), d);
    ops_.RmsNormRows(dspark_context_.data(), w.main_norm.data(), n, d, d, static_cast<float>(c.norm_eps),
                     dspark_context_.data(), d);
  }
  Ops::ScopedPhase t(ops_, Phase::kKv);
  for (int s = 0; s < c.dspark.stages(); ++s)
    InjectKv(ops_, model_, c.num_layers + s, rows, drafting, dspark_context_.data(), &scratch_.attention);
}

namespace {
float Sigmoid(double z) { return static_cast<float>(1.0 / (1.0 + std::exp(-z))); }
}  // namespace

base::Result<std::vector<std::vector<int32_t>>> Engine::DraftDspark(std::span<const DraftRequest> batch,
                                                                    std::vector<std::vector<float>>* confidence) {
  if (!model_.config().dspark.present())
    return base::Error(base::ErrorCode::kFailedPrecondition, "the model has no DSpark stages to draft with");
  FS_RETURN_IF_ERROR(ValidateDrafts(batch));
  ops_.ResetStats();
  const model::ModelConfig& c = model_.config();
  const int block = c.dspark.block_size;
  std::vector<std::vector<int32_t>> drafts(batch.size());
  if (confidence) confidence->assign(batch.size(), {});
  std::vector<UndoLog> logs(batch.size());
  RowBatch rows;
  std::vector<int64_t> head_rows;     // per draft k of request i: its block row
  std::vector<size_t> first_head(batch.size() + 1, 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    first_head[i + 1] = first_head[i];
    if (batch[i].num_drafts == 0) continue;
    SequenceState* st = batch[i].state;
    logs[i].Begin(*st);
    SeqRows seq{rows.num_rows(), rows.num_rows() + block, st->position(), st, &logs[i]};
    for (int k = 0; k < block; ++k) {
      rows.ids.push_back(k == 0 ? batch[i].token : static_cast<int32_t>(c.dspark.noise_token_id));
      rows.pos.push_back(seq.start_pos + k);
      rows.embedding.push_back(nullptr);
      rows.span_first.push_back(seq.start_pos);
      rows.span_last.push_back(seq.start_pos + block - 1);
      if (k < batch[i].num_drafts) head_rows.push_back(seq.row_begin + k);
    }
    first_head[i + 1] = head_rows.size();
    rows.seqs.push_back(seq);
  }
  if (rows.num_rows() > 0) {
    rows.main_angles.Compute(model_.rope(model::RopeTable::kMain), rows.pos);
    rows.compress_angles.Compute(model_.rope(model::RopeTable::kCompress), rows.pos);
    base::AlignedVector<float>& x = draft_streams_;
    x.resize(static_cast<size_t>(rows.num_rows() * c.hc_dim()));
    Embed(rows, x.data());
    for (int s = 0; s < c.dspark.stages(); ++s) RunBlock(ops_, model_, c.num_layers + s, rows, x.data(), &scratch_);
    Ops::ScopedPhase t(ops_, Phase::kMtp);
    draft_logits_.resize(head_rows.size() * static_cast<size_t>(c.vocab_size));
    Head(model_.weights().dspark.hc_head, model_.weights().dspark.norm, x.data(), head_rows, draft_logits_.data());
    MarkovDrafts(batch, first_head, &drafts, confidence);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].num_drafts == 0) continue;
    SequenceState* st = batch[i].state;
    for (int l = c.num_layers; l < st->num_layers(); ++l)
      RollbackLayer(model_, l, logs[i].layers[static_cast<size_t>(l)], logs[i].position, &st->layer(l));
  }
  stats_ = ops_.stats();
  return drafts;
}

// The sequential stage over the head's logits U (draft_logits_) and normed hidden h (head_in_):
// draft k is the argmax of U_k + W2 W1[x_k-1] (x_-1 the anchor), its confidence
// sigmoid(w . [h_k ; W1[x_k-1]]). All requests' position k go through W2 together.
void Engine::MarkovDrafts(std::span<const DraftRequest> batch, const std::vector<size_t>& first_head,
                          std::vector<std::vector<int32_t>>* drafts, std::vector<std::vector<float>>* confidence) {
  const model::ModelConfig& c = model_.config();
  const model::DsparkWeights& w = model_.weights().dspark;
  const int64_t d = c.hidden_size, vocab = c.vocab_size, rank = c.dspark.markov_rank;
  int most = 0;
  for (const DraftRequest& r : batch) most = std::max(most, r.num_drafts);
  for (int k = 0; k < most; ++k) {
    std::vector<size_t> owner;
    for (size_t i = 0; i < batch.size(); ++i)
      if (batch[i].num_drafts > k) owner.push_back(i);
    const int64_t m = static_cast<int64_t>(owner.size());
    markov_prev_.resize(static_cast<size_t>(m * rank));
    markov_bias_.resize(static_cast<size_t>(m * vocab));
    for (int64_t j = 0; j < m; ++j) {
      const size_t i = owner[static_cast<size_t>(j)];
      const int32_t prev = k == 0 ? batch[i].token : (*drafts)[i].back();
      kernels::DequantizeRows(w.markov_w1, prev, prev + 1, markov_prev_.data() + j * rank);
    }
    ops_.Linear(w.markov_w2, markov_prev_.data(), m, rank, markov_bias_.data(), vocab, /*act_quant=*/false);
    for (int64_t j = 0; j < m; ++j) {
      const size_t i = owner[static_cast<size_t>(j)];
      const int64_t head_row = static_cast<int64_t>(first_head[i]) + k;
      float* logits = draft_logits_.data() + head_row * vocab;
      const float* bias = markov_bias_.data() + j * vocab;
      for (int64_t v = 0; v < vocab; ++v) logits[v] += bias[v];
      (*drafts)[i].push_back(ArgmaxRow(logits, vocab));
      if (!confidence) continue;
      const float* h = head_in_.data() + head_row * d;
      const float* prev = markov_prev_.data() + j * rank;
      double z = 0.0;
      for (int64_t e = 0; e < d; ++e) z += static_cast<double>(w.confidence[static_cast<size_t>(e)]) * h[e];
      for (int64_t e = 0; e < rank; ++e) z += static_cast<double>(w.confidence[static_cast<size_t>(d + e)]) * prev[e];
      (*confidence)[i].push_back(Sigmoid(z));
    }
  }
}

}  // namespace flashserve::engine
