// The engine's numeric primitives over rows of activations, dispatching to the optimized or
// the reference kernels and applying the QAT activation quantization where the model's
// reference does. Engine thread only (owns scratch buffers).
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "engine/options.h"
#include "model/matrix.h"

namespace flashserve::engine {

// Work done by the forward calls since the last Reset (for rooflines): FLOPs counted as
// 2 per multiply-add, weight bytes read (each matrix once per call), KV state bytes read.
struct OpStats {
  double flops = 0;
  double weight_bytes = 0;
  double state_bytes = 0;
};

class Ops {
 public:
  Ops(base::ThreadPool& pool, const EngineOptions& options) : pool_(pool), options_(options) {}

  base::ThreadPool& pool() { return pool_; }
  bool qat() const { return options_.qat; }
  bool reference() const { return options_.reference_kernels; }

  // y[i] = W x[i] for n rows. With QAT on and an FP8/FP4 weight, x is first rounded to FP8
  // (per 128 channels, ue8m0 scales) unless act_quant is false (the reference skips wo_a).
  void Linear(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
              bool act_quant = true);

  // Row-wise RMSNorm of n rows of `dim` (row stride ld); w may be null.
  void RmsNormRows(const float* x, const float* w, int64_t n, int64_t dim, int64_t ld, float eps, float* out,
                   int64_t ld_out);

  OpStats& stats() { return stats_; }
  // Records attention-like work done outside Linear.
  void CountWork(double flops, double state_bytes) {
    stats_.flops += flops;
    stats_.state_bytes += state_bytes;
  }

  // Runs fn(row) for every row in [0, n) on the pool.
  template <typename Fn>
  void ForRows(int64_t n, Fn&& fn, int64_t grain = 1) {
    pool_.ParallelFor(n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  }

 private:
  base::ThreadPool& pool_;
  EngineOptions options_;
  std::vector<float> quant_scratch_;
  OpStats stats_;
};

}  // namespace flashserve::engine
