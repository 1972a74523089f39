// Attention sublayer (engine/attention.h).
#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "engine/compressor.h"
#include "engine/compressor_v41.h"
#include "kernels/attention/sink_attention.h"
#include "kernels/norm_rope/norm_rope.h"
#include "kernels/quant/fake_quant.h"

namespace flashserve::engine {
namespace {

using model::AttentionKind;

// Query path: q = RoPE(rms_per_head(wq_b(q_norm(wq_a h)))); also returns q_lat for the indexer.
void QueryPath(Ops& ops, const model::ModelConfig& c, const model::AttentionWeights& w, const RowAngles& angles,
               const float* h, int64_t rows, AttentionScratch* s) {
  const int64_t hd = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const float eps = static_cast<float>(c.norm_eps);
  s->qa.resize(static_cast<size_t>(rows * c.q_lora_rank));
  s->q_lat.resize(s->qa.size());
  s->q.resize(static_cast<size_t>(rows * hd));
  ops.Linear(w.wq_a, h, rows, c.hidden_size, s->qa.data(), c.q_lora_rank);
  ops.RmsNormRows(s->qa.data(), w.q_norm.data(), rows, c.q_lora_rank, c.q_lora_rank, eps, s->q_lat.data(),
                  c.q_lora_rank);
  ops.Linear(w.wq_b, s->q_lat.data(), rows, c.q_lora_rank, s->q.data(), hd);
  ops.RmsNormRows(s->q.data(), nullptr, rows * c.num_heads, c.head_dim, c.head_dim, eps, s->q.data(), c.head_dim);
  ops.ForRows(rows * c.num_heads, [&](int64_t i) {
    int64_t r = i / c.num_heads;
    kernels::ApplyRope(s->q.data() + i * c.head_dim + c.nope_dim(), c.rope_head_dim / 2, angles.Cos(r),
                       angles.Sin(r), false);
  }, 16);
}

// Raw window KV: kv = QAT(RoPE(kv_norm(wkv h))).
void KvPath(Ops& ops, const model::ModelConfig& c, const model::AttentionWeights& w, const RowAngles& angles,
            const float* h, int64_t rows, AttentionScratch* s) {
  s->kv.resize(static_cast<size_t>(rows * c.head_dim));
  ops.Linear(w.wkv, h, rows, c.hidden_size, s->kv.data(), c.head_dim);
  ops.RmsNormRows(s->kv.data(), w.kv_norm.data(), rows, c.head_dim, c.head_dim, static_cast<float>(c.norm_eps),
                  s->kv.data(), c.head_dim);
  ops.ForRows(rows, [&](int64_t r) {
    float* kv = s->kv.data() + r * c.head_dim;
    kernels::ApplyRope(kv + c.nope_dim(), c.rope_head_dim / 2, angles.Cos(r), angles.Sin(r), false);
    if (!ops.qat()) return;
    if (c.is_v41()) {
      kernels::FakeQuantFp8(kv, c.head_dim, 32);  // all channels, block 32
    } else {
      kernels::FakeQuantFp8(kv, c.nope_dim(), 64);  // non-RoPE channels, block 64
    }
  }, 8);
}

CompressorSpec MainSpec(const Model& model, int layer) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  return CompressorSpec{&model.layer(layer).attn.compressor, spec.compress_ratio, c.head_dim, c.rope_head_dim,
                        spec.attention == AttentionKind::kCsa, EntryQuant::kFp8Nope,
                        static_cast<float>(c.norm_eps), &model.rope(spec.rope)};
}

CompressorSpec IndexSpec(const Model& model, int layer) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  return CompressorSpec{&model.layer(layer).attn.indexer.compressor, 4, c.index_head_dim, c.rope_head_dim, true,
                        EntryQuant::kHadamardFp4, static_cast<float>(c.norm_eps), &model.rope(spec.rope)};
}

LayerUndo* UndoOf(const SeqRows& seq, int layer) {
  return seq.undo ? &seq.undo->layers[static_cast<size_t>(layer)] : nullptr;
}

void RunCompressors(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h,
                    AttentionScratch* s) {
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  RunCompressor(ops, MainSpec(model, layer), batch, h, model.config().hidden_size, [&](const SeqRows& seq) {
    LayerState& ls = seq.state->layer(layer);
    LayerUndo* undo = UndoOf(seq, layer);
    return CompressorTarget{&ls.compressor, &ls.compressed, undo ? &undo->main : nullptr};
  }, &s->compressor);
  if (spec.attention != AttentionKind::kCsa) return;
  RunCompressor(ops, IndexSpec(model, layer), batch, h, model.config().hidden_size, [&](const SeqRows& seq) {
    LayerState& ls = seq.state->layer(layer);
    LayerUndo* undo = UndoOf(seq, layer);
    return CompressorTarget{&ls.index_compressor, &ls.index_keys, undo ? &undo->index : nullptr};
  }, &s->compressor);
}

// Key lists per row: the compressed entries of the layer's KV source (those selected by its
// index source, or all visible ones on HCA) ascending, then the raw window in position order
// (ring for positions before the batch, this batch's kv after); a row of a bidirectional span
// also takes the rest of its span, which is all in this batch.
void BuildKeyLists(const Model& model, int layer, const RowBatch& batch, AttentionScratch* s) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  const int64_t rows = batch.num_rows();
  s->keys.clear();
  s->key_offset.assign(static_cast<size_t>(rows) + 1, 0);
  const EntrySelection* selection =
      spec.index_source >= 0 ? &s->selections[static_cast<size_t>(spec.index_source)] : nullptr;
  for (const SeqRows& seq : batch.seqs) {
    const LayerState& ls = seq.state->layer(layer);
    const float* entries = spec.kv_source >= 0 ? seq.state->layer(spec.kv_source).compressed.data() : nullptr;
    for (int64_t r = seq.row_begin; r < seq.row_end; ++r) {
      const int64_t t = batch.pos[static_cast<size_t>(r)];
      if (selection) {
        const int32_t* sel = selection->begin(r);
        for (int64_t i = 0; i < selection->size(r); ++i) s->keys.push_back(entries + sel[i] * c.head_dim);
      } else if (entries) {
        const int64_t visible = (t + 1) / spec.compress_ratio;
        for (int64_t e = 0; e < visible; ++e) s->keys.push_back(entries + e * c.head_dim);
      }
      int64_t first = std::max<int64_t>(0, t - c.sliding_window + 1), last = t;
      if (!batch.span_last.empty() && batch.span_last[static_cast<size_t>(r)] >= 0) {
        first = std::min(first, batch.span_first[static_cast<size_t>(r)]);
        last = batch.span_last[static_cast<size_t>(r)];
      }
      for (int64_t p = first; p <= last; ++p) {
        s->keys.push_back(p >= seq.start_pos ? s->kv.data() + (seq.row_begin + p - seq.start_pos) * c.head_dim
                                             : ls.ring.data() + (p % ls.window) * c.head_dim);
      }
      s->key_offset[r + 1] = static_cast<int64_t>(s->keys.size());
    }
  }
}

void CoreAttention(Ops& ops, const Model& model, int layer, const RowBatch& batch, AttentionScratch* s) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  const float* sinks = model.layer(layer).attn.attn_sink.data();
  const RowAngles& angles = batch.angles(spec.rope == model::RopeTable::kCompress);
  const int64_t rows = batch.num_rows();
  const int heads = c.num_heads, dim = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  const double total_keys = static_cast<double>(s->key_offset[rows]);
  ops.CountWork(4.0 * total_keys * heads * dim, total_keys * dim * sizeof(float));
  // A task per row and group of heads: every head of a row where the rows alone keep the
  // threads busy (its keys then come from memory once and feed all its heads), else groups of
  // 8 heads (the AVX-512 kernel's head block) so that a few rows still spread over the threads.
  // Each head's result is the same either way (the kernel's order contract).
  const int heads_per_task = rows >= 2 * ops.pool().num_threads() ? heads : 8;
  const int groups = (heads + heads_per_task - 1) / heads_per_task;
  s->o.resize(static_cast<size_t>(rows * heads * dim));
  ops.ForRows(rows * groups, [&](int64_t task) {
    const int64_t r = task / groups;
    const int h0 = static_cast<int>(task % groups) * heads_per_task, h1 = std::min(heads, h0 + heads_per_task);
    const float* const* keys = s->keys.data() + s->key_offset[r];
    const int num_keys = static_cast<int>(s->key_offset[r + 1] - s->key_offset[r]);
    const float* q = s->q.data() + r * heads * dim;
    float* o = s->o.data() + r * heads * dim;
    if (ops.reference()) {
      kernels::SinkAttentionReference(q + h0 * dim, h1 - h0, dim, keys, num_keys, sinks + h0, scale,
                                      o + h0 * dim);
    } else {
      thread_local std::vector<float> scratch;
      scratch.resize(static_cast<size_t>(num_keys));
      kernels::SinkAttention(q, h0, h1, dim, keys, num_keys, sinks, scale, o, scratch.data());
    }
    for (int h = h0; h < h1; ++h)
      kernels::ApplyRope(o + h * dim + c.nope_dim(), c.rope_head_dim / 2, angles.Cos(r), angles.Sin(r), true);
  }, 1);
}

void UpdateRings(int layer, std::span<const SeqRows> seqs, const float* kv, int dim) {
  for (const SeqRows& seq : seqs) {
    LayerState& ls = seq.state->layer(layer);
    const int64_t n = seq.row_end - seq.row_begin;
    LayerUndo* undo = UndoOf(seq, layer);
    for (int64_t i = std::max<int64_t>(0, n - ls.window); i < n; ++i) {
      const int64_t p = seq.start_pos + i;
      if (undo) {
        const float* old = ls.ring.data() + (p % ls.window) * dim;
        undo->ring_pos.push_back(p);
        undo->ring_old.insert(undo->ring_old.end(), old, old + dim);
      }
      std::memcpy(ls.ring.data() + (p % ls.window) * dim, kv + (seq.row_begin + i) * dim, sizeof(float) * dim);
    }
  }
}

// out = wo_b(concat_g wo_a[g] o_g); wo_a takes no activation quantization (as the reference).
void OutputProjection(Ops& ops, const model::ModelConfig& c, const model::AttentionWeights& w, int64_t rows,
                      float* out, AttentionScratch* s) {
  const int64_t hd = static_cast<int64_t>(c.num_heads) * c.head_dim, group_in = hd / c.o_groups;
  const int64_t lora = static_cast<int64_t>(c.o_groups) * c.o_lora_rank;
  s->z.resize(static_cast<size_t>(rows * lora));
  const auto group = [&](int64_t g) {
    model::Matrix wg = w.wo_a.RowSlice(g * c.o_lora_rank, (g + 1) * c.o_lora_rank);
    ops.Linear(wg, s->o.data() + g * group_in, rows, hd, s->z.data() + g * c.o_lora_rank, lora, /*act_quant=*/false);
  };
  if (ops.SideBySide(rows, c.o_groups)) {
    ops.ForRows(c.o_groups, group);
  } else {
    for (int64_t g = 0; g < c.o_groups; ++g) group(g);
  }
  ops.Linear(w.wo_b, s->z.data(), rows, lora, out, c.hidden_size);
}

}  // namespace

void RollbackLayer(const Model& model, int layer, const LayerUndo& undo, int64_t limit, LayerState* ls) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  const int64_t dim = c.head_dim;
  for (size_t i = undo.ring_pos.size(); i-- > 0;) {
    if (undo.ring_pos[i] < limit) break;
    std::memcpy(ls->ring.data() + (undo.ring_pos[i] % ls->window) * dim, undo.ring_old.data() + i * dim,
                sizeof(float) * dim);
  }
  if (!spec.owns_compressor) return;
  if (c.is_v41()) {
    const int64_t n = ReplayFoldsV41(spec.compress_ratio, c.head_dim, undo.main, limit, &ls->compressor);
    ls->compressed.resize(undo.compressed_before + static_cast<size_t>(n * c.head_dim));
    ls->index_keys.resize(undo.index_keys_before + static_cast<size_t>(n * c.index_head_dim));
    return;
  }
  const int64_t n = ReplayFolds(MainSpec(model, layer), undo.main, limit, &ls->compressor);
  ls->compressed.resize(undo.compressed_before + static_cast<size_t>(n * c.head_dim));
  if (spec.attention != AttentionKind::kCsa) return;
  const int64_t k = ReplayFolds(IndexSpec(model, layer), undo.index, limit, &ls->index_compressor);
  ls->index_keys.resize(undo.index_keys_before + static_cast<size_t>(k * c.index_head_dim));
}

void InjectKv(Ops& ops, const Model& model, int layer, const RowBatch& batch, std::span<const SeqRows> seqs,
              const float* h, AttentionScratch* s) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  KvPath(ops, c, model.layer(layer).attn, batch.angles(spec.rope == model::RopeTable::kCompress), h,
         batch.num_rows(), s);
  UpdateRings(layer, seqs, s->kv.data(), c.head_dim);
}

void RunAttention(Ops& ops, const Model& model, int layer, const RowBatch& batch, const float* h, float* out,
                  AttentionScratch* s) {
  const model::ModelConfig& c = model.config();
  const model::LayerSpec& spec = model.plan()[static_cast<size_t>(layer)];
  const model::AttentionWeights& w = model.layer(layer).attn;
  const RowAngles& angles = batch.angles(spec.rope == model::RopeTable::kCompress);
  const int64_t rows = batch.num_rows();
  {
    Ops::ScopedPhase t(ops, Phase::kQuery);
    QueryPath(ops, c, w, angles, h, rows, s);
  }
  {
    Ops::ScopedPhase t(ops, Phase::kKv);
    KvPath(ops, c, w, angles, h, rows, s);
  }
  if (spec.owns_compressor) {
    Ops::ScopedPhase t(ops, Phase::kCompress);
    if (c.is_v41()) {
      RunCompressorV41(ops, model, layer, batch, h, &s->compressor);
    } else {
      RunCompressors(ops, model, layer, batch, h, s);
    }
  }
  if (spec.runs_indexer) {
    Ops::ScopedPhase t(ops, Phase::kIndex);
    s->selections.resize(model.plan().size());
    EntrySelection* selection = &s->selections[static_cast<size_t>(layer)];
    if (c.is_v41()) {
      RunIndexerV41(ops, model, layer, batch, h, s->q_lat.data(), selection, &s->candidates, &s->indexer);
    } else {
      RunIndexer(ops, c, w.indexer, layer, batch, h, s->q_lat.data(), selection, &s->indexer);
    }
  }
  {
    Ops::ScopedPhase t(ops, Phase::kAttend);
    BuildKeyLists(model, layer, batch, s);
    CoreAttention(ops, model, layer, batch, s);
    UpdateRings(layer, batch.seqs, s->kv.data(), c.head_dim);
  }
  Ops::ScopedPhase t(ops, Phase::kOutput);
  OutputProjection(ops, c, w, rows, out, s);
}

}  // namespace flashserve::engine
