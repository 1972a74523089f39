// Block forward (engine/block.h).
#include "engine/block.h"

namespace flashserve::engine {

void RunBlock(Ops& ops, const Model& model, int layer, const RowBatch& batch, float* x, BlockScratch* s) {
  const model::ModelConfig& c = model.config();
  const model::LayerWeights& w = model.layer(layer);
  const int64_t rows = batch.num_rows(), d = c.hidden_size;
  const float eps = static_cast<float>(c.norm_eps);
  s->u.resize(static_cast<size_t>(rows * d));
  s->h.resize(s->u.size());
  s->y.resize(s->u.size());

  // V4.1: each site collapses with the pre computed by the site before it; Engram layers first
  // add their n-gram lookup to the streams.
  const bool lagged = c.is_v41();
  if (w.engram.embed.valid()) {
    Ops::ScopedPhase t(ops, Phase::kEngram);
    RunEngram(ops, model, layer, batch, x, &s->engram);
  }
  {
    Ops::ScopedPhase t(ops, Phase::kMhc);
    HcPre(ops, c, w.hc_attn, x, rows, &s->mix, s->u.data(), &s->mixes, lagged ? s->lagged_pre.data() : nullptr);
    ops.RmsNormRows(s->u.data(), w.attn_norm.data(), rows, d, d, eps, s->h.data(), d);
  }
  RunAttention(ops, model, layer, batch, s->h.data(), s->y.data(), &s->attention);
  {
    Ops::ScopedPhase t(ops, Phase::kMhc);
    HcPost(ops, c, s->mix, s->y.data(), rows, x);
    if (lagged) s->lagged_pre = s->mix.pre;
    HcPre(ops, c, w.hc_ffn, x, rows, &s->mix, s->u.data(), &s->mixes, lagged ? s->lagged_pre.data() : nullptr);
    ops.RmsNormRows(s->u.data(), w.ffn_norm.data(), rows, d, d, eps, s->h.data(), d);
  }
  RunMoe(ops, c, w.moe, model.plan()[static_cast<size_t>(layer)].hash_moe, batch.ids.data(), s->h.data(), rows,
         s->y.data(), &s->moe);
  Ops::ScopedPhase t(ops, Phase::kMhc);
  HcPost(ops, c, s->mix, s->y.data(), rows, x);
  if (lagged) s->lagged_pre = s->mix.pre;
}

}  // namespace flashserve::engine
