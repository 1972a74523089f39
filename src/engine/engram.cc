// Engram lookup and gate (engine/engram.h).
#include "engine/engram.h"

#include <cmath>

#include "kernels/gemm/matmul.h"
#include "model/checkpoint_specs.h"

namespace flashserve::engine {
namespace {

// Table row ids of every row: grams[s] is the compressed id s positions back.
void HashRows(const Model& model, int engram_index, const RowBatch& batch, EngramScratch* s) {
  const model::EngramHasher& hasher = *model.engram_hasher();
  const int cols = hasher.num_columns(), back = hasher.lookback();
  s->rows.resize(static_cast<size_t>(batch.num_rows() * cols));
  std::vector<int64_t> grams(static_cast<size_t>(back) + 1);
  for (const SeqRows& seq : batch.seqs) {
    const std::vector<int32_t>& recent = seq.state->recent_tokens();  // before seq.start_pos
    for (int64_t r = seq.row_begin; r < seq.row_end; ++r) {
      const int64_t pos = batch.pos[static_cast<size_t>(r)];
      for (int k = 0; k <= back; ++k) {
        const int64_t p = pos - k;
        int64_t id;
        if (p < 0) {
          id = model.engram_pad_class();
        } else if (p >= seq.start_pos) {
          id = model.EngramClass(batch.ids[static_cast<size_t>(seq.row_begin + p - seq.start_pos)]);
        } else {
          id = model.EngramClass(recent[recent.size() - static_cast<size_t>(seq.start_pos - p)]);
        }
        grams[static_cast<size_t>(k)] = id;
      }
      hasher.RowIds(engram_index, grams, s->rows.data() + r * cols);
    }
  }
}

float SignedSqrtGate(float dot) {
  const float mag = std::sqrt(std::max(std::fabs(dot), 1e-6f));
  return 1.0f / (1.0f + std::exp(-std::copysign(mag, dot)));
}

}  // namespace

void RunEngram(Ops& ops, const Model& model, int layer, const RowBatch& batch, float* x, EngramScratch* s) {
  const model::ModelConfig& c = model.config();
  const int engram_index = model::EngramIndex(c, layer);
  const model::EngramWeights& w = model.layer(layer).engram;
  const int hc = c.hc_mult, cols = model.engram_hasher()->num_columns(), hd = c.engram.head_dim;
  const int64_t rows = batch.num_rows(), d = c.hidden_size, in = static_cast<int64_t>(cols) * hd;
  HashRows(model, engram_index, batch, s);
  s->gathered.resize(static_cast<size_t>(rows * in));
  ops.ForRows(rows * cols, [&](int64_t i) {
    const int64_t row = s->rows[static_cast<size_t>(i)];
    kernels::DequantizeRows(w.embed, row, row + 1, s->gathered.data() + i * hd);
  }, 16);
  s->kv.resize(static_cast<size_t>(rows * (hc + 1) * d));
  ops.Linear(w.wkv, s->gathered.data(), rows, in, s->kv.data(), (hc + 1) * d);
  const float eps = static_cast<float>(c.norm_eps), inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  ops.ForRows(rows, [&](int64_t r) {
    const float* kv = s->kv.data() + r * (hc + 1) * d;
    const float* value = kv + hc * d;
    for (int i = 0; i < hc; ++i) {
      float* xi = x + (r * hc + i) * d;
      const float* key = kv + i * d;
      const float* qw = w.q_weight.data() + i * d;
      const float* kw = w.k_weight.data() + i * d;
      float sx = 0.0f, sk = 0.0f, dot = 0.0f;
      for (int64_t k = 0; k < d; ++k) {
        sx += xi[k] * xi[k];
        sk += key[k] * key[k];
        dot += xi[k] * (qw[k] * kw[k]) * key[k];
      }
      const float rstd = 1.0f / std::sqrt(sx / static_cast<float>(d) + eps) / std::sqrt(sk / static_cast<float>(d) + eps);
      const float gate = SignedSqrtGate(dot * rstd * inv_sqrt_d);
      for (int64_t k = 0; k < d; ++k) xi[k] += gate * value[k];
    }
  }, 4);
}

}  // namespace flashserve::engine
