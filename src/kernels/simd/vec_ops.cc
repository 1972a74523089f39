// Portable vector primitives and the per-ISA choice (kernels/simd/vec_ops.h). The portable
// reductions keep 16 partial sums (element i -> lane i % 16, multiply then add), then a halving
// tree; the file is built without FMA contraction, so this order is what runs.
#include "kernels/simd/vec_ops.h"

#include "base/check.h"

namespace flashserve::kernels::simd {
namespace {

constexpr int kLanes = 16;

float TreeSum(float* acc) {
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

float GenericDot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return TreeSum(acc);
}

float GenericSumSquares(const float* x, int64_t n) { return GenericDot(x, x, n); }

void GenericDots(const float* const* a, int num_a, const float* const* b, int num_b, int64_t n, float* out) {
  for (int i = 0; i < num_a; ++i)
    for (int j = 0; j < num_b; ++j) out[i * num_b + j] = GenericDot(a[i], b[j], n);
}

void GenericWeightedSum(const float* const* rows, int num_rows, const float* const* weights, int num_out, int64_t n,
                        float* const* out) {
  for (int o = 0; o < num_out; ++o) {
    float* dst = out[o];
    for (int64_t c = 0; c < n; ++c) dst[c] = 0.0f;
    for (int j = 0; j < num_rows; ++j) {
      const float p = weights[o][j];
      const float* row = rows[j];
      for (int64_t c = 0; c < n; ++c) dst[c] += p * row[c];
    }
  }
}

void GenericScale(const float* x, const float* w, float s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = w != nullptr ? w[i] * (x[i] * s) : x[i] * s;
}

float GenericSum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  for (int64_t i = 0; i < n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  return TreeSum(acc);
}

float GenericFmaLoop(int64_t iterations) {
  constexpr int kAcc = 12;
  float acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = 0.001f * static_cast<float>(j);
  for (int64_t it = 0; it < iterations; ++it)
    for (int j = 0; j < kAcc; ++j) acc[j] = acc[j] * 0.999999f + 1e-7f;
  float sum = 0.0f;
  for (float v : acc) sum += v;
  return sum;
}

}  // namespace

void MixStreamsPortable(float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb,
                        const float* y) {
  for (int64_t c = 0; c < n; ++c) {
    float old[kMaxStreams];
    for (int i = 0; i < hc; ++i) old[i] = x[i * stride + c];
    for (int j = 0; j < hc; ++j) {
      float acc = post[j] * y[c];
      for (int i = 0; i < hc; ++i) acc += comb[i * hc + j] * old[i];
      x[j * stride + c] = acc;
    }
  }
}

void CollapsePortable(const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out) {
  for (int64_t c = 0; c < n; ++c) {
    float acc = w[0] * x[c];
    for (int i = 1; i < hc; ++i) acc += w[i] * x[i * stride + c];
    out[c] = acc;
  }
}

const VecOps& GetVecOps(Isa isa) {
  static const VecOps generic{1,           &GenericDot, &GenericSumSquares, &GenericDots,     &GenericWeightedSum,
                              &GenericScale, &GenericSum, &MixStreamsPortable, &CollapsePortable, &GenericFmaLoop};
  FS_CHECK(IsaSupported(isa), "instruction set %s not supported here", IsaName(isa));
  switch (isa) {
    case Isa::kAvx512: return VecOpsAvx512();
    case Isa::kAvx2: return VecOpsAvx2();
    case Isa::kGeneric: break;
  }
  return generic;
}

}  // namespace flashserve::kernels::simd
