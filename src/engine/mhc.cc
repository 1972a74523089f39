// Hyper-connection sites and head (engine/mhc.h).
#include "engine/mhc.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/norm_rope/norm_rope.h"
#include "kernels/streams/streams.h"

namespace flashserve::engine {
namespace {

// Rows per parallel chunk of the per-row hyper-connection work, so that a decode batch of up
// to 16 rows runs on the calling thread: its work is a few microseconds per row, less than
// waking a worker (medium, decode batch 8: chunks of 4 rows were no faster than running inline,
// and much slower when the worker had gone to sleep).
constexpr int64_t kRowsPerChunk = 16;

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

model::Matrix F32View(const std::vector<float>& data, int64_t rows, int64_t cols) {
  return model::F32Matrix(data.data(), rows, cols);
}

// mixes[row] = (fn . v) / rms(v) for each row of x ([rows, hc*d]).
void Mixes(Ops& ops, const model::ModelConfig& c, const model::HcWeights& w, int num_mix, const float* x,
           int64_t rows, float* mixes) {
  const int64_t width = c.hc_dim();
  ops.Linear(F32View(w.fn, num_mix, width), x, rows, width, mixes, num_mix);
  const float eps = static_cast<float>(c.norm_eps);
  ops.ForRows(rows, [&](int64_t r) {
    const float* v = x + r * width;
    float inv = ops.reference() ? kernels::InverseRmsReference(v, width, eps) : kernels::InverseRms(v, width, eps);
    for (int i = 0; i < num_mix; ++i) mixes[r * num_mix + i] *= inv;
  }, kRowsPerChunk);
}

// out[k] = sum_i weights[i] * x_i[k] for the hc streams of one row.
void Collapse(const float* x, const float* weights, int hc, int64_t d, float* out) {
  kernels::CollapseStreams(x, hc, d, d, weights, out);
}

}  // namespace

void Sinkhorn(float* c, int hc, int iters, float eps) {
  for (int i = 0; i < hc; ++i) {  // row softmax + eps
    float* row = c + i * hc;
    float m = *std::max_element(row, row + hc);
    float s = 0.0f;
    for (int j = 0; j < hc; ++j) s += (row[j] = std::exp(row[j] - m));
    for (int j = 0; j < hc; ++j) row[j] = row[j] / s + eps;
  }
  auto normalize_cols = [&] {
    for (int j = 0; j < hc; ++j) {
      float s = 0.0f;
      for (int i = 0; i < hc; ++i) s += c[i * hc + j];
      for (int i = 0; i < hc; ++i) c[i * hc + j] /= s + eps;
    }
  };
  normalize_cols();
  for (int it = 1; it < iters; ++it) {
    for (int i = 0; i < hc; ++i) {
      float s = 0.0f;
      for (int j = 0; j < hc; ++j) s += c[i * hc + j];
      for (int j = 0; j < hc; ++j) c[i * hc + j] /= s + eps;
    }
    normalize_cols();
  }
}

void HcPre(Ops& ops, const model::ModelConfig& c, const model::HcWeights& w, const float* x, int64_t rows,
           HcMix* mix, float* u, base::AlignedVector<float>* scratch, const float* collapse_pre) {
  const int hc = c.hc_mult, num_mix = c.hc_mix();
  const int64_t d = c.hidden_size;
  scratch->resize(static_cast<size_t>(rows * num_mix));
  float* mixes = scratch->data();
  Mixes(ops, c, w, num_mix, x, rows, mixes);
  mix->pre.resize(static_cast<size_t>(rows * hc));
  mix->post.resize(static_cast<size_t>(rows * hc));
  mix->comb.resize(static_cast<size_t>(rows * hc * hc));
  const float hc_eps = static_cast<float>(c.hc_eps);
  ops.ForRows(rows, [&](int64_t r) {
    const float* m = mixes + r * num_mix;
    float* pre = mix->pre.data() + r * hc;
    float* post = mix->post.data() + r * hc;
    float* comb = mix->comb.data() + r * hc * hc;
    for (int i = 0; i < hc; ++i) {
      pre[i] = Sigmoid(m[i] * w.scale[0] + w.base[i]) + hc_eps;
      post[i] = 2.0f * Sigmoid(m[hc + i] * w.scale[1] + w.base[hc + i]);
    }
    for (int k = 0; k < hc * hc; ++k) comb[k] = m[2 * hc + k] * w.scale[2] + w.base[2 * hc + k];
    Sinkhorn(comb, hc, c.hc_sinkhorn_iters, hc_eps);
    Collapse(x + r * hc * d, collapse_pre ? collapse_pre + r * hc : pre, hc, d, u + r * d);
  }, kRowsPerChunk);
}

void HcCollapse(Ops& ops, const model::ModelConfig& c, const float* x, const float* weights, int64_t rows,
                float* out) {
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size;
  ops.ForRows(rows, [&](int64_t r) { Collapse(x + r * hc * d, weights + r * hc, hc, d, out + r * d); },
              kRowsPerChunk);
}

void HcPost(Ops& ops, const model::ModelConfig& c, const HcMix& mix, const float* y, int64_t rows, float* x) {
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size;
  // In place, one pass over memory (kernels/streams: per element post_j * y + sum_i comb_ij *
  // x_i accumulated over i, products then adds, on every ISA).
  ops.ForRows(rows, [&](int64_t r) {
    kernels::MixStreams(x + r * hc * d, hc, d, d, mix.post.data() + r * hc, mix.comb.data() + r * hc * hc, y + r * d);
  }, kRowsPerChunk);
}

void HcHead(Ops& ops, const model::ModelConfig& c, const model::HcWeights& w, const float* x, int64_t rows,
            float* out, base::AlignedVector<float>* scratch) {
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size;
  scratch->resize(static_cast<size_t>(rows * hc));
  float* mixes = scratch->data();
  Mixes(ops, c, w, hc, x, rows, mixes);
  const float hc_eps = static_cast<float>(c.hc_eps);
  ops.ForRows(rows, [&](int64_t r) {
    float pre[16];
    for (int i = 0; i < hc; ++i) pre[i] = Sigmoid(mixes[r * hc + i] * w.scale[0] + w.base[i]) + hc_eps;
    Collapse(x + r * hc * d, pre, hc, d, out + r * d);
  }, kRowsPerChunk);
}

}  // namespace flashserve::engine
