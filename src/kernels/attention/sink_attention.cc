// Sink attention (kernels/attention/sink_attention.h).
#include "kernels/attention/sink_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace flashserve::kernels {
namespace {

inline float Dot16(const float* a, const float* b, int n) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

}  // namespace

void SinkAttention(const float* q, int head_begin, int head_end, int dim, const float* const* keys,
                   int num_keys, const float* sinks, float scale, float* out, float* scratch) {
  for (int h = head_begin; h < head_end; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * dim;
    float* oh = out + static_cast<int64_t>(h) * dim;
    float m = sinks[h];
    for (int j = 0; j < num_keys; ++j) {
      scratch[j] = Dot16(qh, keys[j], dim) * scale;
      m = std::max(m, scratch[j]);
    }
    float denom = std::exp(sinks[h] - m);
    for (int j = 0; j < num_keys; ++j) {
      scratch[j] = std::exp(scratch[j] - m);
      denom += scratch[j];
    }
    std::fill(oh, oh + dim, 0.0f);
    for (int j = 0; j < num_keys; ++j) {
      const float p = scratch[j];
      const float* k = keys[j];
      for (int c = 0; c < dim; ++c) oh[c] += p * k[c];
    }
    const float inv = 1.0f / denom;
    for (int c = 0; c < dim; ++c) oh[c] *= inv;
  }
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
