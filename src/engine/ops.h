// The engine's numeric primitives over rows of activations, dispatching to the optimized or
// the reference kernels and applying the QAT activation quantization where the model's
// reference does. Called by the engine's forward pass (attention, compressors, indexer, MoE,
// mHC, head). Owned and driven by the engine thread; the products and roundings (Linear,
// LinearPair, RoundToFp8, ...) are reentrant from its pool's tasks (thread-local scratch).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "base/thread_pool.h"
#include "engine/options.h"
#include "model/matrix.h"

namespace flashserve::engine {

// Forward-pass phases timed when EngineOptions::profile is on.
enum class Phase { kEmbed, kMhc, kNorm, kQuery, kKv, kCompress, kIndex, kAttend, kOutput, kRoute, kExperts,
                   kShared, kHead, kMtp, kEngram, kCount };
const char* PhaseName(Phase phase);

// Work done by the forward calls since the last Reset (for rooflines): FLOPs counted as
// 2 per multiply-add, the FLOPs the AMX tiles do (kernels::AmxPasses per product: BF16 weights
// take three passes), weight bytes read (each matrix once per call), KV state bytes read, and with
// profiling on, per phase: wall seconds, FLOPs and bytes (weights and state; index kCount holds
// work done outside every phase).
struct OpStats {
  static constexpr size_t kPhases = static_cast<size_t>(Phase::kCount);
  double flops = 0;
  double tiled_flops = 0;  // of flops, those of products on AMX tiles
  double tile_flops = 0;   // what the tiles do for them: tiled_flops times each product's passes
  double weight_bytes = 0;
  double state_bytes = 0;
  // Products whose activation rows, as given to the kernels (Linear's rounded copy where QAT
  // rounds the input), do not all start on a cache line (a buffer off one, or a row stride that
  // is not a multiple of 16 floats): vector loads then straddle two lines.
  int64_t unaligned_products = 0;
  std::array<double, kPhases> phase_seconds{};
  std::array<double, kPhases + 1> phase_flops{}, phase_bytes{};
};

class Ops {
 public:
  Ops(base::ThreadPool& pool, const EngineOptions& options) : pool_(pool), options_(options) {}

  base::ThreadPool& pool() { return pool_; }
  bool qat() const { return options_.qat; }
  bool reference() const { return options_.reference_kernels; }

  // y[i] = W x[i] for n rows. With QAT on and an FP8/FP4 weight, x is first rounded to FP8
  // (per 128 channels, ue8m0 scales) unless act_quant is false (the reference skips wo_a).
  // Reentrant: may be called from pool tasks (it then runs on that thread).
  void Linear(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
              bool act_quant = true);
  // Two products of the same input (an expert's w1 and w3): x is rounded to FP8 once where both
  // would round it, so the results equal two Linear calls. Reentrant, as Linear.
  void LinearPair(const model::Matrix& a, const model::Matrix& b, const float* x, int64_t n, int64_t ldx, float* ya,
                  float* yb, int64_t ldy);

  // Whether Linear rounds its input to FP8 for w (QAT on, an FP8/FP4 weight, act_quant).
  bool RoundsInput(const model::Matrix& w, bool act_quant = true) const {
    return options_.qat && act_quant && w.quantized();
  }
  // n rows of x (stride ldx) rounded to FP8 per 128 channels into buffer (stride cols), as
  // Linear rounds its input for a matrix of `cols` columns; RoundRowsToFp8 in place. Reentrant,
  // as Linear.
  const float* RoundToFp8(const float* x, int64_t n, int64_t ldx, int64_t cols,
                          base::AlignedVector<float>& buffer);
  void RoundRowsToFp8(float* x, int64_t n, int64_t ld, int64_t cols);
  // n rows of x (stride ld) rounded in place to the nearest BF16 (ties to even), as REF casts a
  // norm's output to its activation dtype (the head's input, with QAT on). Reentrant.
  void RoundRowsToBf16(float* x, int64_t n, int64_t ld, int64_t cols);
  // Linear and LinearPair for an input already rounded (RoundToFp8, RoundRowsToFp8), for
  // matrices whose RoundsInput holds: the same results without rounding again (the MoE rounds
  // its input once for all the experts a row goes to). Reentrant, as Linear.
  void LinearOfRounded(const model::Matrix& w, const float* q, int64_t n, int64_t ldq, float* y, int64_t ldy);
  void LinearPairOfRounded(const model::Matrix& a, const model::Matrix& b, const float* q, int64_t n, int64_t ldq,
                           float* ya, float* yb, int64_t ldy);

  // Row-wise RMSNorm of n rows of `dim` (row stride ld); w may be null.
  void RmsNormRows(const float* x, const float* w, int64_t n, int64_t dim, int64_t ld, float eps, float* out,
                   int64_t ld_out);

  // Snapshot / reset of the work counters (engine thread).
  OpStats stats() const;
  void ResetStats();
  // Records attention-like work done outside Linear. Thread-safe.
  void CountWork(double flops, double state_bytes) {
    flops_.fetch_add(flops, std::memory_order_relaxed);
    state_bytes_.fetch_add(state_bytes, std::memory_order_relaxed);
    CountPhaseWork(flops, state_bytes);
  }

  // Times the enclosing scope as `phase` when profiling is on, and files the work counted
  // meanwhile (by any thread) under it. Opened and closed on the engine thread. A scope inside another files its own work and returns
  // the rest to the outer phase (whose time then includes it: the engine does not nest them).
  class ScopedPhase {
   public:
    ScopedPhase(Ops& ops, Phase phase) : ops_(ops.options_.profile ? &ops : nullptr), phase_(phase) {
      if (!ops_) return;
      outer_ = ops_->phase_.exchange(static_cast<int>(phase_), std::memory_order_relaxed);
      start_ = std::chrono::steady_clock::now();
    }
    ~ScopedPhase() {
      if (!ops_) return;
      ops_->stats_.phase_seconds[static_cast<size_t>(phase_)] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      ops_->phase_.store(outer_, std::memory_order_relaxed);
    }

   private:
    Ops* ops_;
    Phase phase_;
    int outer_ = static_cast<int>(Phase::kCount);  // the phase to return to
    std::chrono::steady_clock::time_point start_;
  };

  // Decode-sized calls: a few independent small products (each a few hundred KB streamed from
  // memory) run better one per thread than each split over all threads in turn, paying a
  // dispatch each. True for up to kSideBySideRows rows when `products` keep every thread busy.
  // Each product is computed the same way either way, so results never depend on it.
  static constexpr int64_t kSideBySideRows = 8;
  bool SideBySide(int64_t rows, int64_t products) const {
    return rows <= kSideBySideRows && products >= pool_.num_threads();
  }

  // Runs fn(task) for every task in [0, n) on the pool, one task at a time per thread (for a
  // few heavy tasks of uneven cost, largest first).
  template <typename Fn>
  void ForTasks(int64_t n, Fn&& fn) {
    pool_.ParallelTasks(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  }

  // Runs fn(row) for every row in [0, n) on the pool.
  template <typename Fn>
  void ForRows(int64_t n, Fn&& fn, int64_t grain = 1) {
    pool_.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  }

 private:
  // The product itself, counted; `rounded`: x is FP8-rounded (so AMX may take it).
  void Product(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy, bool rounded);

  // With profiling on, adds work to the current phase's counters. Thread-safe.
  void CountPhaseWork(double flops, double bytes) {
    if (!options_.profile) return;
    const auto p = static_cast<size_t>(phase_.load(std::memory_order_relaxed));
    phase_flops_[p].fetch_add(flops, std::memory_order_relaxed);
    phase_bytes_[p].fetch_add(bytes, std::memory_order_relaxed);
  }

  base::ThreadPool& pool_;
  EngineOptions options_;
  std::atomic<double> flops_{0}, tiled_flops_{0}, tile_flops_{0}, weight_bytes_{0}, state_bytes_{0};
  std::atomic<int64_t> unaligned_products_{0};
  std::atomic<int> phase_{static_cast<int>(Phase::kCount)};  // kCount: outside every phase
  std::array<std::atomic<double>, OpStats::kPhases + 1> phase_flops_{}, phase_bytes_{};
  OpStats stats_;  // phase times (engine thread only)
};

// The lowest index of the largest of x[0..n) (a greedy draft's token). Any thread.
int32_t ArgmaxRow(const float* x, int64_t n);

}  // namespace flashserve::engine
