// Compressor folding and entry post-processing (engine/compressor.h).
#include "engine/compressor.h"

#include "base/check.h"
#include "kernels/quant/fake_quant.h"

namespace flashserve::engine {

void FinishEntry(Ops& ops, const CompressorSpec& spec, int64_t window_index, float* entry) {
  if (ops.reference()) {
    kernels::RmsNormReference(entry, spec.weights->norm.data(), spec.dim, spec.norm_eps, entry);
  } else {
    kernels::RmsNorm(entry, spec.weights->norm.data(), spec.dim, spec.norm_eps, entry);
  }
  const int half = spec.rope_dim / 2;
  FS_CHECK(half <= 256, "rope dim %d too large", spec.rope_dim);
  float cos[256], sin[256];
  spec.rope->Angles(window_index * spec.ratio, cos, sin);
  kernels::ApplyRope(entry + spec.dim - spec.rope_dim, half, cos, sin, /*inverse=*/false);
  if (!ops.qat()) return;
  if (spec.quant == EntryQuant::kFp8Nope) {
    kernels::FakeQuantFp8(entry, spec.dim - spec.rope_dim, 64);
  } else {
    kernels::HadamardTransform(entry, spec.dim);
    kernels::FakeQuantFp4(entry, spec.dim, 32);
  }
}

void FoldCompressorRow(Ops& ops, const CompressorSpec& spec, int64_t pos, const float* kv, const float* gate,
                       CompressorState* state, std::vector<float>* entries) {
  const int dim = spec.dim;
  if (spec.overlap) {
    // Second half pools into this window's entry, first half into the next window's.
    state->cur.Fold(kv + dim, gate + dim, dim);
    state->next.Fold(kv, gate, dim);
  } else {
    state->cur.Fold(kv, gate, dim);
  }
  if ((pos + 1) % spec.ratio != 0) return;
  const size_t offset = entries->size();
  if (entries->capacity() < offset + dim) {
    // Grow by whole 128-token blocks so memory use follows EstimateStateBytes.
    const size_t per_block = static_cast<size_t>(128 / spec.ratio) * dim;
    entries->reserve((offset / per_block + 1) * per_block);
  }
  entries->resize(offset + static_cast<size_t>(dim));
  float* entry = entries->data() + offset;
  state->cur.Finish(entry, dim);
  FinishEntry(ops, spec, pos / spec.ratio, entry);
  if (spec.overlap) {
    std::swap(state->cur, state->next);
    state->next.Reset(dim);
  } else {
    state->cur.Reset(dim);
  }
}

void RunCompressor(Ops& ops, const CompressorSpec& spec, const RowBatch& batch, const float* h, int64_t d,
                   const SelectTarget& select, std::vector<float>* scratch) {
  const int64_t rows = batch.num_rows();
  const int64_t width = (spec.overlap ? 2 : 1) * static_cast<int64_t>(spec.dim);
  scratch->resize(static_cast<size_t>(2 * rows * width));
  float* kv = scratch->data();
  float* gate = kv + rows * width;
  const auto project = [&](int64_t which) {
    ops.Linear(which == 0 ? spec.weights->wkv : spec.weights->wgate, h, rows, d, which == 0 ? kv : gate, width);
  };
  if (ops.SideBySide(rows, 2)) {
    ops.ForRows(2, project);
  } else {
    project(0);
    project(1);
  }
  // Sequences fold into their own states, so they run side by side (a decode batch's folds, an
  // exponential per channel and row, were a serial section); each sequence's rows in order.
  ops.ForRows(static_cast<int64_t>(batch.seqs.size()), [&](int64_t i) {
    const SeqRows& seq = batch.seqs[static_cast<size_t>(i)];
    CompressorTarget target = select(seq);
    for (int64_t r = seq.row_begin; r < seq.row_end; ++r) {
      const int64_t pos = batch.pos[static_cast<size_t>(r)];
      const float* ape = spec.weights->ape.data() + (pos % spec.ratio) * width;
      float* g = gate + r * width;
      for (int64_t k = 0; k < width; ++k) g[k] += ape[k];
      FoldCompressorRow(ops, spec, pos, kv + r * width, g, target.state, target.entries);
    }
  });
}

}  // namespace flashserve::engine
