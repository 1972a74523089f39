// The MTP module (v4-architecture.md section 4.6), part of Engine::Forward: position t combines
// the trunk's final streams at t with the embedding of token t+1, runs the MTP block (its own
// sliding-window state) and its own hc_head/norm with the shared head (predicting token t+2).
// The last position of a call waits in the state until the next token arrives.
#include <cstring>

#include "engine/engine.h"
#include "kernels/gemm/matmul.h"

namespace flashserve::engine {

namespace {
struct MtpRow {
  const float* streams;
  int32_t next_token;
};
}  // namespace

void Engine::MtpModule(RowBatch& rows, const std::vector<const float*>& streams,
                       const std::vector<int64_t>& logit_rows, base::AlignedVector<float>* z, float* logits) {
  const model::ModelConfig& c = model_.config();
  const int64_t d = c.hidden_size, width = c.hc_dim(), n = rows.num_rows();
  const int hc = c.hc_mult, layer = c.num_layers;
  rows.main_angles.Compute(model_.rope(model::RopeTable::kMain), rows.pos);
  rows.compress_angles.Compute(model_.rope(model::RopeTable::kCompress), rows.pos);
  const model::MtpExtraWeights& w = model_.layer(layer).mtp;
  const float eps = static_cast<float>(c.norm_eps);
  z->assign(static_cast<size_t>(n * width), 0.0f);
  {  // the block's own phases time the MTP block; kMtp the module's input and head
    Ops::ScopedPhase t(ops_, Phase::kMtp);
    base::AlignedVector<float> e(static_cast<size_t>(n * d)), proj(e.size()), h(static_cast<size_t>(n * width));
    for (int64_t r = 0; r < n; ++r) {
      kernels::DequantizeRows(model_.weights().embed, rows.ids[r], rows.ids[r] + 1, e.data() + r * d);
      std::memcpy(h.data() + r * width, streams[static_cast<size_t>(r)], sizeof(float) * width);
    }
    ops_.RmsNormRows(e.data(), w.enorm.data(), n, d, d, eps, e.data(), d);
    ops_.Linear(w.e_proj, e.data(), n, d, proj.data(), d);
    ops_.RmsNormRows(h.data(), w.hnorm.data(), n * hc, d, d, eps, h.data(), d);
    ops_.Linear(w.h_proj, h.data(), n * hc, d, z->data(), d);
    for (int64_t r = 0; r < n; ++r)
      for (int i = 0; i < hc; ++i)
        for (int64_t k = 0; k < d; ++k) (*z)[(r * hc + i) * d + k] += proj[r * d + k];
  }
  RunBlock(ops_, model_, layer, rows, z->data(), &scratch_);
  Ops::ScopedPhase t(ops_, Phase::kMtp);
  Head(w.hc_head, w.norm, z->data(), logit_rows, logits);
}

void Engine::RunMtp(std::span<const ForwardRequest> batch, const RowBatch& trunk, const float* x,
                    ForwardResult* out) {
  const model::ModelConfig& c = model_.config();
  const int64_t width = c.hc_dim();
  RowBatch rows;
  std::vector<MtpRow> inputs;
  std::vector<int64_t> logit_rows;
  const bool mtp = c.num_mtp_layers > 0;  // DSpark states keep drafter layers of another kind
  out->mtp_begin.assign(1, 0);
  for (size_t i = 0; i < batch.size(); ++i) {
    SequenceState* st = batch[i].state;
    const SeqRows& seq = trunk.seqs[i];
    out->mtp_first_pos.push_back(st->mtp_position());
    if (mtp && st->with_mtp()) {
      SeqRows mseq;
      mseq.row_begin = rows.num_rows();
      mseq.start_pos = st->mtp_position();
      mseq.state = st;
      mseq.undo = batch[i].undo;
      if (!st->pending_hidden().empty())
        inputs.push_back({st->pending_hidden().data(), trunk.ids[seq.row_begin]});
      for (int64_t r = seq.row_begin; r + 1 < seq.row_end; ++r) inputs.push_back({x + r * width, trunk.ids[r + 1]});
      for (int64_t r = mseq.row_begin; r < static_cast<int64_t>(inputs.size()); ++r) {
        rows.ids.push_back(inputs[r].next_token);
        rows.pos.push_back(mseq.start_pos + (r - mseq.row_begin));
        if (batch[i].mtp_logits) logit_rows.push_back(r);
      }
      mseq.row_end = rows.num_rows();
      if (mseq.row_end > mseq.row_begin) rows.seqs.push_back(mseq);
    }
    out->mtp_begin.push_back(static_cast<int64_t>(logit_rows.size()));
  }
  if (rows.num_rows() > 0) {
    std::vector<const float*> streams;
    for (const MtpRow& in : inputs) streams.push_back(in.streams);
    out->mtp_logits = std::move(spare_mtp_logits_);  // written whole by the head (Recycle)
    spare_mtp_logits_ = {};
    out->mtp_logits.resize(logit_rows.size() * static_cast<size_t>(c.vocab_size));
    base::AlignedVector<float> z;
    MtpModule(rows, streams, logit_rows, &z, out->mtp_logits.data());
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    SequenceState* st = batch[i].state;
    if (!mtp || !st->with_mtp()) continue;
    const SeqRows& seq = trunk.seqs[i];
    st->pending_hidden().assign(x + (seq.row_end - 1) * width, x + seq.row_end * width);
    st->set_mtp_position(seq.start_pos + (seq.row_end - seq.row_begin) - 1);
  }
}

}  // namespace flashserve::engine
