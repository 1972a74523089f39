// V4.1 KV-source compressor (engine/compressor_v41.h).
#include "engine/compressor_v41.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "kernels/norm_rope/norm_rope.h"
#include "kernels/quant/fake_quant.h"

namespace flashserve::engine {
namespace {

// A latent finished in this call: which sequence it belongs to and its entry index.
struct NewEntry {
  LayerState* state;
  int64_t window;
};

// Appends `dim` floats, growing by whole 128-token blocks so memory follows EstimateStateBytes.
float* AppendRow(base::AlignedVector<float>* v, int dim, int ratio) {
  const size_t offset = v->size();
  if (v->capacity() < offset + dim) {
    const size_t per_block = static_cast<size_t>(128 / ratio) * dim;
    v->reserve((offset / per_block + 1) * per_block);
  }
  v->resize(offset + static_cast<size_t>(dim));
  return v->data() + offset;
}

void Rotate(const kernels::RopeTable& rope, int64_t position, float* x, int dim, int rope_dim) {
  FS_CHECK(rope_dim <= 512, "rope dim %d too large", rope_dim);
  float cos[256], sin[256];
  rope.Angles(position, cos, sin);
  kernels::ApplyRope(x + dim - rope_dim, rope_dim / 2, cos, sin, /*inverse=*/false);
}

// One row folded into a KV source's pool; true when it completes a latent (then the pool is
// reset after `finished` takes the value, if given).
bool FoldRow(CompressorState* carry, const float* kv, const float* gate, int64_t pos, int ratio, int dim,
             float* finished) {
  carry->cur.Fold(kv, gate, dim);
  if ((pos + 1) % ratio != 0) return false;
  if (finished) carry->cur.Finish(finished, dim);
  carry->cur.Reset(dim);
  return true;
}

}  // namespace

int64_t ReplayFoldsV41(int ratio, int dim, const FoldLog& log, int64_t limit, CompressorState* state) {
  *state = log.start;
  int64_t made = 0;
  for (size_t i = 0; i < log.pos.size() && log.pos[i] < limit; ++i)
    made += FoldRow(state, log.kv.data() + i * dim, log.gate.data() + i * dim, log.pos[i], ratio, dim, nullptr);
  return made;
}

void RunCompressorV41(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h,
                      base::AlignedVector<float>* scratch) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  const model::AttentionWeights& w = model.layer(layer).attn;
  const int ratio = spec.compress_ratio, dim = c.head_dim, kdim = c.index_head_dim, rope = c.rope_head_dim;
  const int64_t rows = batch.num_rows();
  const float eps = static_cast<float>(c.norm_eps);
  scratch->assign(static_cast<size_t>(2 * rows * dim), 0.0f);
  float* kv = scratch->data();
  float* gate = kv + rows * dim;  // stays 0 at ratio 1: a one-slot pool returns its value exactly
  ops.Linear(w.compressor.wkv, h, rows, c.hidden_size, kv, dim);
  if (ratio > 1) ops.Linear(w.compressor.wgate, h, rows, c.hidden_size, gate, dim);

  // Fold every row into its sequence's pool in position order; collect finished latents.
  base::AlignedVector<float> latents;
  std::vector<NewEntry> made;
  for (const SeqRows& seq : batch.seqs) {
    LayerState& ls = seq.state->layer(layer);
    FoldLog* log = seq.undo ? &seq.undo->layers[static_cast<size_t>(layer)].main : nullptr;
    for (int64_t r = seq.row_begin; r < seq.row_end; ++r) {
      const int64_t pos = batch.pos[static_cast<size_t>(r)];
      if (log) {
        log->pos.push_back(pos);
        log->kv.insert(log->kv.end(), kv + r * dim, kv + (r + 1) * dim);
        log->gate.insert(log->gate.end(), gate + r * dim, gate + (r + 1) * dim);
      }
      latents.resize(latents.size() + static_cast<size_t>(dim));
      if (!FoldRow(&ls.compressor, kv + r * dim, gate + r * dim, pos, ratio, dim, latents.data() + latents.size() - dim)) {
        latents.resize(latents.size() - static_cast<size_t>(dim));
        continue;
      }
      made.push_back({&ls, pos / ratio});
    }
  }
  const int64_t n = static_cast<int64_t>(made.size());
  if (n == 0) return;
  ops.RmsNormRows(latents.data(), w.compressor.norm.data(), n, dim, dim, eps, latents.data(), dim);
  base::AlignedVector<float> keys(static_cast<size_t>(n * kdim));
  ops.Linear(w.indexer.wk, latents.data(), n, dim, keys.data(), kdim);
  ops.RmsNormRows(keys.data(), w.indexer.k_norm.data(), n, kdim, kdim, eps, keys.data(), kdim);
  const kernels::RopeTable& table = model.rope(spec.rope);
  for (int64_t i = 0; i < n; ++i) {  // in row order, so each sequence's entries stay ordered
    const int64_t position = made[i].window * ratio;
    float* key = AppendRow(&made[i].state->index_keys, kdim, ratio);
    std::memcpy(key, keys.data() + i * kdim, sizeof(float) * kdim);
    Rotate(table, position, key, kdim, rope);
    float* entry = AppendRow(&made[i].state->compressed, dim, ratio);
    std::memcpy(entry, latents.data() + i * dim, sizeof(float) * dim);
    Rotate(table, position, entry, dim, rope);
    if (ops.qat()) {
      kernels::FakeQuantFp4(key, kdim, 32);
      kernels::FakeQuantFp4E4m3(entry, dim, 16);
    }
  }
}

}  // namespace flashserve::engine
