// Compressor folding and entry post-processing (engine/compressor.h).
#include "engine/compressor.h"

#include <algorithm>
#include <utility>

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

namespace {

// A sequence with at least kSlicedFoldRows rows in the batch folds in tasks of
// kFoldSliceChannels channels (a prefill's 512 rows folded on one thread took a large share of
// the compressor phase); shorter ones fold whole, one task each.
constexpr int64_t kSlicedFoldRows = 16;
constexpr int kFoldSliceChannels = 64;

// Entry slots for `count` more entries, growing by whole 128-token blocks so that memory use
// follows EstimateStateBytes. Returns the first new entry's offset.
size_t AppendEntries(const CompressorSpec& spec, int64_t count, base::AlignedVector<float>* entries) {
  const size_t offset = entries->size(), size = offset + static_cast<size_t>(count * spec.dim);
  const size_t per_block = static_cast<size_t>(128 / spec.ratio) * spec.dim;
  if (entries->capacity() < size) entries->reserve((size + per_block - 1) / per_block * per_block);
  entries->resize(size);
  return offset;
}

// Rows [r0, r1) of one sequence folded on channels [k0, k1): the pooled values of each window
// that completes go to consecutive entries from `entry`. The pools' counts are left alone.
void FoldChannelSlice(const CompressorSpec& spec, const RowBatch& batch, int64_t r0, int64_t r1, const float* kv,
                      float* gate, int64_t width, int k0, int k1, CompressorState* state, float* entry) {
  const int dim = spec.dim;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t pos = batch.pos[static_cast<size_t>(r)];
    const float* ape = spec.weights->ape.data() + (pos % spec.ratio) * width;
    const float* a = kv + r * width;
    float* g = gate + r * width;
    for (int half = 0; half < (spec.overlap ? 2 : 1); ++half)
      for (int k = k0; k < k1; ++k) g[half * dim + k] += ape[half * dim + k];
    if (spec.overlap) {
      // Second half pools into this window's entry, first half into the next window's.
      state->cur.FoldChannels(a + dim, g + dim, k0, k1);
      state->next.FoldChannels(a, g, k0, k1);
    } else {
      state->cur.FoldChannels(a, g, k0, k1);
    }
    if ((pos + 1) % spec.ratio != 0) continue;
    state->cur.FinishChannels(entry, k0, k1);
    entry += dim;
    if (spec.overlap) {
      state->cur.TakeChannels(state->next, k0, k1);
    } else {
      state->cur.ResetChannels(k0, k1);
    }
  }
}

// The pools' counts after rows [r0, r1), as FoldChannelSlice leaves them.
void CountFolds(const CompressorSpec& spec, const RowBatch& batch, int64_t r0, int64_t r1, CompressorState* state) {
  for (int64_t r = r0; r < r1; ++r) {
    ++state->cur.count;
    if (spec.overlap) ++state->next.count;
    if ((batch.pos[static_cast<size_t>(r)] + 1) % spec.ratio != 0) continue;
    state->cur.count = spec.overlap ? state->next.count : 0;
    if (spec.overlap) state->next.count = 0;
  }
}

// One sequence's share of a batch's fold: where its pools live and where its completed windows'
// entries go (consecutive windows from first_window, at offset in its entries).
struct SeqFold {
  CompressorTarget target;
  int64_t first_window = 0, windows = 0;
  size_t offset = 0;
};

// Counts each sequence's completed windows (their entries not yet appended).
std::vector<SeqFold> PlanFolds(const CompressorSpec& spec, const RowBatch& batch, const SelectTarget& select) {
  std::vector<SeqFold> folds(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqRows& seq = batch.seqs[i];
    SeqFold& f = folds[i];
    f.target = select(seq);
    for (int64_t r = seq.row_begin; r < seq.row_end; ++r) {
      const int64_t pos = batch.pos[static_cast<size_t>(r)];
      if ((pos + 1) % spec.ratio != 0) continue;
      if (f.windows++ == 0) f.first_window = pos / spec.ratio;
    }
  }
  return folds;
}

// Folds every row (kv, gate projected) into its sequence's pools in row order, each channel on
// its own: a sequence of many rows (a prefill, alone or beside decoding sequences) in slices of
// channels side by side, the others whole; then finishes the entries of the windows that
// completed.
void FoldBatch(Ops& ops, const CompressorSpec& spec, const RowBatch& batch, const float* kv, float* gate,
               int64_t width, const SelectTarget& select) {
  std::vector<SeqFold> folds = PlanFolds(spec, batch, select);
  struct Task {
    size_t seq;
    int k0, k1;
    bool whole;  // the sequence's only task: it appends the entries itself
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < folds.size(); ++i) {
    const SeqRows& seq = batch.seqs[i];
    const int slices = seq.row_end - seq.row_begin >= kSlicedFoldRows ? std::max(1, spec.dim / kFoldSliceChannels) : 1;
    // Growing an entry store copies it (every 128 tokens): a whole sequence's task does that,
    // so decoding sequences copy side by side.
    if (slices > 1) folds[i].offset = AppendEntries(spec, folds[i].windows, folds[i].target.entries);
    for (int k = 0; k < slices; ++k)
      tasks.push_back({i, spec.dim * k / slices, spec.dim * (k + 1) / slices, slices == 1});
  }
  ops.ForRows(static_cast<int64_t>(tasks.size()), [&](int64_t t) {
    const Task& task = tasks[static_cast<size_t>(t)];
    SeqFold& f = folds[task.seq];
    const SeqRows& seq = batch.seqs[task.seq];
    if (task.whole) f.offset = AppendEntries(spec, f.windows, f.target.entries);
    FoldChannelSlice(spec, batch, seq.row_begin, seq.row_end, kv, gate, width, task.k0, task.k1, f.target.state,
                     f.target.entries->data() + f.offset);
  });
  std::vector<std::pair<size_t, int64_t>> finished;  // (sequence, its entry)
  for (size_t i = 0; i < folds.size(); ++i) {
    CountFolds(spec, batch, batch.seqs[i].row_begin, batch.seqs[i].row_end, folds[i].target.state);
    for (int64_t e = 0; e < folds[i].windows; ++e) finished.emplace_back(i, e);
  }
  ops.ForRows(static_cast<int64_t>(finished.size()), [&](int64_t t) {
    const auto [i, e] = finished[static_cast<size_t>(t)];
    FinishEntry(ops, spec, folds[i].first_window + e, folds[i].target.entries->data() + folds[i].offset + e * spec.dim);
  }, 4);
}

// Keeps the projected rows of the sequences that log their calls.
void LogRows(const RowBatch& batch, const float* kv, const float* gate, int64_t width,
             const SelectTarget& select) {
  for (const SeqRows& seq : batch.seqs) {
    FoldLog* log = select(seq).log;
    if (log == nullptr) continue;
    for (int64_t r = seq.row_begin; r < seq.row_end; ++r) {
      log->pos.push_back(batch.pos[static_cast<size_t>(r)]);
      log->kv.insert(log->kv.end(), kv + r * width, kv + (r + 1) * width);
      log->gate.insert(log->gate.end(), gate + r * width, gate + (r + 1) * width);
    }
  }
}

}  // namespace

int64_t ReplayFolds(const CompressorSpec& spec, const FoldLog& log, int64_t limit, CompressorState* state) {
  *state = log.start;
  const int64_t width = (spec.overlap ? 2 : 1) * static_cast<int64_t>(spec.dim);
  RowBatch rows;
  for (int64_t p : log.pos)
    if (p < limit) rows.pos.push_back(p);
  const int64_t n = static_cast<int64_t>(rows.pos.size());
  int64_t windows = 0;
  for (int64_t p : rows.pos) windows += (p + 1) % spec.ratio == 0;
  std::vector<float> gate(log.gate.begin(), log.gate.begin() + n * width);
  base::AlignedVector<float> entries(static_cast<size_t>((windows + 1) * spec.dim));
  FoldChannelSlice(spec, rows, 0, n, log.kv.data(), gate.data(), width, 0, spec.dim, state, entries.data());
  CountFolds(spec, rows, 0, n, state);
  return windows;
}

void RunCompressor(Ops& ops, const CompressorSpec& spec, const RowBatch& batch, const float* h, int64_t d,
                   const SelectTarget& select, base::AlignedVector<float>* scratch) {
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
  LogRows(batch, kv, gate, width, select);
  FoldBatch(ops, spec, batch, kv, gate, width, select);
}

}  // namespace flashserve::engine
