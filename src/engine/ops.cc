// Kernel dispatch and QAT activation quantization (engine/ops.h).
#include "engine/ops.h"

#include <cstring>

#include "base/check.h"
#include "kernels/gemm/matmul.h"
#include "kernels/norm_rope/norm_rope.h"
#include "kernels/quant/fake_quant.h"
#include "model/number_formats.h"

namespace flashserve::engine {

const char* PhaseName(Phase phase) {
  static const char* kNames[] = {"embed", "mhc", "norm", "query", "kv", "compress", "index", "attend",
                                 "output", "route", "experts", "shared", "head", "mtp", "engram"};
  return kNames[static_cast<size_t>(phase)];
}

const float* Ops::RoundToFp8(const float* x, int64_t n, int64_t ldx, int64_t cols, base::AlignedVector<float>& buffer) {
  buffer.resize(static_cast<size_t>(n * cols));
  float* q = buffer.data();
  ForRows(n, [&](int64_t i) {
    std::memcpy(q + i * cols, x + i * ldx, sizeof(float) * cols);
    kernels::FakeQuantFp8(q + i * cols, cols, 128);
  }, 8);
  return q;
}

void Ops::Linear(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                 bool act_quant) {
  if (n <= 0) return;
  const bool rounded = RoundsInput(w, act_quant);
  if (rounded) {
    thread_local base::AlignedVector<float> quant_scratch;
    x = RoundToFp8(x, n, ldx, w.cols, quant_scratch);
    ldx = w.cols;
  }
  Product(w, x, n, ldx, y, ldy, rounded);
}

void Ops::Product(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                  bool rounded) {
  const double flops = 2.0 * static_cast<double>(n) * w.rows * w.cols, bytes = static_cast<double>(w.StoredBytes());
  flops_.fetch_add(flops, std::memory_order_relaxed);
  weight_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  CountPhaseWork(flops, bytes);
  if (reinterpret_cast<uintptr_t>(x) % base::kCacheLineBytes != 0 ||
      (n > 1 && ldx * sizeof(float) % base::kCacheLineBytes != 0))
    unaligned_products_.fetch_add(1, std::memory_order_relaxed);
  if (options_.reference_kernels) {
    kernels::MatMulReference(w, x, n, ldx, y, ldy);
    return;
  }
  if (const int passes = kernels::AmxPasses(w, rounded); passes > 0) {
    tiled_flops_.fetch_add(flops, std::memory_order_relaxed);
    tile_flops_.fetch_add(passes * flops, std::memory_order_relaxed);
  }
  kernels::MatMul(w, x, n, ldx, y, ldy, pool_);
}

void Ops::LinearPair(const model::Matrix& a, const model::Matrix& b, const float* x, int64_t n, int64_t ldx,
                     float* ya, float* yb, int64_t ldy) {
  if (n <= 0) return;
  if (!RoundsInput(a, true) || !RoundsInput(b, true) || a.cols != b.cols) {
    Linear(a, x, n, ldx, ya, ldy);
    Linear(b, x, n, ldx, yb, ldy);
    return;
  }
  thread_local base::AlignedVector<float> rounded;  // not Linear's scratch: it outlives the calls below
  LinearPairOfRounded(a, b, RoundToFp8(x, n, ldx, a.cols, rounded), n, a.cols, ya, yb, ldy);
}

void Ops::RoundRowsToFp8(float* x, int64_t n, int64_t ld, int64_t cols) {
  ForRows(n, [&](int64_t i) { kernels::FakeQuantFp8(x + i * ld, cols, 128); }, 8);
}

void Ops::RoundRowsToBf16(float* x, int64_t n, int64_t ld, int64_t cols) {
  for (int64_t i = 0; i < n; ++i)
    for (float* v = x + i * ld; v < x + i * ld + cols; ++v) *v = model::Bf16ToFloat(model::FloatToBf16(*v));
}

void Ops::LinearOfRounded(const model::Matrix& w, const float* q, int64_t n, int64_t ldq, float* y, int64_t ldy) {
  FS_DCHECK(RoundsInput(w), "LinearOfRounded: a matrix whose input is not rounded");
  if (n > 0) Product(w, q, n, ldq, y, ldy, true);
}

void Ops::LinearPairOfRounded(const model::Matrix& a, const model::Matrix& b, const float* q, int64_t n, int64_t ldq,
                              float* ya, float* yb, int64_t ldy) {
  LinearOfRounded(a, q, n, ldq, ya, ldy);
  LinearOfRounded(b, q, n, ldq, yb, ldy);
}

OpStats Ops::stats() const {
  OpStats s = stats_;
  s.flops = flops_.load();
  s.tiled_flops = tiled_flops_.load();
  s.tile_flops = tile_flops_.load();
  s.weight_bytes = weight_bytes_.load();
  s.state_bytes = state_bytes_.load();
  s.unaligned_products = unaligned_products_.load();
  for (size_t p = 0; p <= OpStats::kPhases; ++p) {
    s.phase_flops[p] = phase_flops_[p].load();
    s.phase_bytes[p] = phase_bytes_[p].load();
  }
  return s;
}

void Ops::ResetStats() {
  stats_ = OpStats{};
  flops_ = 0;
  tiled_flops_ = 0;
  tile_flops_ = 0;
  weight_bytes_ = 0;
  state_bytes_ = 0;
  unaligned_products_ = 0;
  for (size_t p = 0; p <= OpStats::kPhases; ++p) {
    phase_flops_[p] = 0;
    phase_bytes_[p] = 0;
  }
}

void Ops::RmsNormRows(const float* x, const float* w, int64_t n, int64_t dim, int64_t ld, float eps, float* out,
                      int64_t ld_out) {
  const bool ref = options_.reference_kernels;
  ForRows(n, [&](int64_t i) {
    if (ref) {
      kernels::RmsNormReference(x + i * ld, w, dim, eps, out + i * ld_out);
    } else {
      kernels::RmsNorm(x + i * ld, w, dim, eps, out + i * ld_out);
    }
  }, 4);
}

int32_t ArgmaxRow(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

}  // namespace flashserve::engine
