// Sink attention (kernels/attention/sink_attention.h): the per-ISA dispatch, the portable
// kernel and the fp64 reference.
#include "kernels/attention/sink_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/aligned_vector.h"
#include "base/check.h"
#include "kernels/attention/sink_attention_simd.h"
#include "kernels/simd/vec_ops.h"

namespace flashserve::kernels {

namespace {

constexpr int kHeadGroup = 4;  // heads sharing each key load

// Turns one head's logits into softmax weights in place (the sink joins the denominator);
// returns 1 / denominator.
float SoftmaxWithSink(float* logits, int num_keys, float scale, float sink) {
  float m = sink;
  for (int j = 0; j < num_keys; ++j) {
    logits[j] *= scale;
    m = std::max(m, logits[j]);
  }
  float denom = std::exp(sink - m);
  for (int j = 0; j < num_keys; ++j) {
    logits[j] = std::exp(logits[j] - m);
    denom += logits[j];
  }
  return 1.0f / denom;
}

// The portable kernel: heads in groups of kHeadGroup, logits by simd::VecOps::dots, softmax
// per head, values by weighted_sum, then the 1 / denominator scale. Every step computes each
// head on its own in a fixed order, so grouping never changes a result.
void GenericSinkAttention(const float* q, int head_begin, int head_end, int dim, const float* const* keys,
                          int num_keys, const float* sinks, float scale, float* out) {
  const simd::VecOps& ops = simd::GetVecOps(Isa::kGeneric);
  thread_local base::AlignedVector<float> logits;
  if (logits.size() < static_cast<size_t>(kHeadGroup * num_keys)) logits.resize(kHeadGroup * num_keys);
  for (int h0 = head_begin; h0 < head_end; h0 += kHeadGroup) {
    const int group = std::min(kHeadGroup, head_end - h0);
    const float* qs[kHeadGroup];
    const float* weights[kHeadGroup];
    float* outs[kHeadGroup];
    float inv[kHeadGroup];
    for (int t = 0; t < group; ++t) {
      qs[t] = q + static_cast<int64_t>(h0 + t) * dim;
      weights[t] = logits.data() + t * num_keys;
      outs[t] = out + static_cast<int64_t>(h0 + t) * dim;
    }
    ops.dots(qs, group, keys, num_keys, dim, logits.data());
    for (int t = 0; t < group; ++t) inv[t] = SoftmaxWithSink(logits.data() + t * num_keys, num_keys, scale, sinks[h0 + t]);
    ops.weighted_sum(keys, num_keys, weights, group, dim, outs);
    for (int t = 0; t < group; ++t) ops.scale(outs[t], nullptr, inv[t], dim, outs[t]);
  }
}

}  // namespace

// The vector kernels (attention/sink_attention_simd.h) with a per-thread buffer for the
// softmax numerators of every head of the call.
void SinkAttentionWithIsa(Isa isa, const float* q, int head_begin, int head_end, int dim,
                          const float* const* keys, int num_keys, const float* sinks, float scale, float* out,
                          float* /*scratch*/) {
  FS_CHECK(IsaSupported(isa), "instruction set %s not supported here", IsaName(isa));
  if (head_end <= head_begin) return;
  if (isa == Isa::kGeneric) {
    GenericSinkAttention(q, head_begin, head_end, dim, keys, num_keys, sinks, scale, out);
    return;
  }
  thread_local base::AlignedVector<float> weights;
  const size_t need = static_cast<size_t>(head_end - head_begin) * (static_cast<size_t>(num_keys) + 1);
  if (weights.size() < need) weights.resize(need);
  attention::AttentionArgs a;
  a.q = q;
  a.head_begin = head_begin;
  a.head_end = head_end;
  a.dim = dim;
  a.keys = keys;
  a.num_keys = num_keys;
  a.sinks = sinks;
  a.scale = scale;
  a.out = out;
  a.weights = weights.data();
  if (isa == Isa::kAvx512) {
    attention::AttendAvx512(a);
  } else {
    attention::AttendAvx2(a);
  }
}

void SinkAttention(const float* q, int head_begin, int head_end, int dim, const float* const* keys,
                   int num_keys, const float* sinks, float scale, float* out, float* scratch) {
  SinkAttentionWithIsa(BestIsa(), q, head_begin, head_end, dim, keys, num_keys, sinks, scale, out, scratch);
}

void SinkAttentionReference(const float* q, int num_heads, int dim, const float* const* keys, int num_keys,
                            const float* sinks, float scale, float* out) {
  std::vector<double> logits(static_cast<size_t>(num_keys));
  for (int h = 0; h < num_heads; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * dim;
    double m = sinks[h];
    for (int j = 0; j < num_keys; ++j) {
      double acc = 0.0;
      for (int c = 0; c < dim; ++c) acc += static_cast<double>(qh[c]) * keys[j][c];
      logits[j] = acc * scale;
      m = std::max(m, logits[j]);
    }
    double denom = std::exp(sinks[h] - m);
    for (int j = 0; j < num_keys; ++j) {
      logits[j] = std::exp(logits[j] - m);
      denom += logits[j];
    }
    for (int c = 0; c < dim; ++c) {
      double acc = 0.0;
      for (int j = 0; j < num_keys; ++j) acc += logits[j] * keys[j][c];
      out[static_cast<int64_t>(h) * dim + c] = static_cast<float>(acc / denom);
    }
  }
}

}  // namespace flashserve::kernels
