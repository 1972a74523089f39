// ViT, aligner and span embeddings (engine/vision_tower.h).
#include "engine/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "kernels/activation/softmax_row.h"
#include "kernels/activation/swiglu.h"
#include "kernels/gemm/matmul.h"
#include "kernels/norm_rope/norm_rope.h"

namespace flashserve::engine {
namespace {

using base::ErrorCode;

void AddBias(float* y, int64_t rows, int64_t cols, const std::vector<float>& bias) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[static_cast<size_t>(c)];
}

// Axial 2D RoPE (rotate-half over a head's two halves): angle j of the first half of the rope
// dims follows the patch row, the second half the patch column. The cos / sin of every position
// and angle, computed once per call: [n][half] each.
struct RopeAngles {
  std::vector<float> cos, sin;
  int half = 0;
};

RopeAngles Angles(int n, int vit_w, int head_dim, double theta) {
  RopeAngles r;
  r.half = head_dim / 2;
  const int quarter = r.half / 2;
  std::vector<double> inv_freq(static_cast<size_t>(quarter));
  for (int j = 0; j < quarter; ++j) inv_freq[static_cast<size_t>(j)] = 1.0 / std::pow(theta, static_cast<double>(2 * j) / r.half);
  r.cos.resize(static_cast<size_t>(n) * r.half);
  r.sin.resize(r.cos.size());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < r.half; ++j) {
      const int pos = j < quarter ? i / vit_w : i % vit_w;
      const float angle = static_cast<float>(pos) * static_cast<float>(inv_freq[static_cast<size_t>(j % quarter)]);
      r.cos[static_cast<size_t>(i) * r.half + j] = std::cos(angle);
      r.sin[static_cast<size_t>(i) * r.half + j] = std::sin(angle);
    }
  }
  return r;
}

void Rotate(float* x, const RopeAngles& r, int i) {
  const float* c = &r.cos[static_cast<size_t>(i) * r.half];
  const float* s = &r.sin[static_cast<size_t>(i) * r.half];
  for (int j = 0; j < r.half; ++j) {
    const float a = x[j], b = x[j + r.half];
    x[j] = a * c[j] - b * s[j];
    x[j + r.half] = b * c[j] + a * s[j];
  }
}

float Gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

}  // namespace

VisionTower::VisionTower(const Model& model, base::ThreadPool& pool) : model_(model), pool_(pool) {}

// Grown, never shrunk or cleared: every element is written before it is read.
void VisionTower::Scratch::Size(int n, int dim, int inter) {
  const auto grow = [](std::vector<float>& v, int64_t size) {
    if (static_cast<int64_t>(v.size()) < size) v.resize(static_cast<size_t>(size));
  };
  grow(normed, int64_t{n} * dim);
  grow(qkv, int64_t{n} * 3 * dim);
  grow(attn, int64_t{n} * dim);
  grow(proj, int64_t{n} * dim);
  grow(gate_up, int64_t{n} * 2 * inter);
  grow(act, int64_t{n} * inter);
}

void VisionTower::Scratch::SizeAttention(int n, int head_dim) {
  const size_t rows = static_cast<size_t>(n) * head_dim;
  for (std::vector<float>* v : {&q, &k, &vt, &o})
    if (v->size() < rows) v->resize(rows);
  if (sums.size() < static_cast<size_t>(n)) sums.resize(static_cast<size_t>(n));
  if (scores.size() < static_cast<size_t>(n) * n) scores.resize(static_cast<size_t>(n) * n);
}

// Full attention per head as two matrix products on the GEMM kernels (scores = K q, then the
// exponentials times V), the row exponentials vectorised, each row divided by its sum at the end.
void VisionTower::Attention(const float* qkv, int n, int vit_w, float* out) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const int hd = v.head_dim(), dim = v.dim;
  const RopeAngles angles = Angles(n, vit_w, hd, v.rope_theta);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t nn = static_cast<size_t>(n);
  Scratch& s = scratch_;
  s.SizeAttention(n, hd);
  std::vector<float>&q = s.q, &k = s.k, &vt = s.vt, &o = s.o, &sums = s.sums, &scores = s.scores;
  const auto f32 = [](const std::vector<float>& data, int64_t rows, int64_t cols) {
    return model::F32Matrix(data.data(), rows, cols);
  };
  for (int h = 0; h < v.num_heads; ++h) {
    pool_.ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* row = qkv + i * 3 * dim + static_cast<int64_t>(h) * hd;
        std::copy_n(row, hd, &q[static_cast<size_t>(i) * hd]);
        std::copy_n(row + dim, hd, &k[static_cast<size_t>(i) * hd]);
        Rotate(&q[static_cast<size_t>(i) * hd], angles, static_cast<int>(i));
        Rotate(&k[static_cast<size_t>(i) * hd], angles, static_cast<int>(i));
        for (int c = 0; c < hd; ++c) vt[static_cast<size_t>(c) * nn + static_cast<size_t>(i)] = row[2 * dim + c];
      }
    });
    kernels::MatMul(f32(k, n, hd), q.data(), n, hd, scores.data(), n, pool_);  // scores[i][j] = q_i . k_j
    pool_.ParallelFor(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sums[static_cast<size_t>(i)] = kernels::ExpShiftedSum(&scores[static_cast<size_t>(i) * nn], n, scale);
    });
    kernels::MatMul(f32(vt, hd, n), scores.data(), n, n, o.data(), hd, pool_);  // o[i] = sum_j e_ij v_j
    for (int i = 0; i < n; ++i) {
      float* dst = out + static_cast<int64_t>(i) * dim + static_cast<int64_t>(h) * hd;
      for (int c = 0; c < hd; ++c) dst[c] = o[static_cast<size_t>(i) * hd + c] / sums[static_cast<size_t>(i)];
    }
  }
}

void VisionTower::Block(const model::VisionBlockWeights& w, int n, int vit_w, std::vector<float>& x) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const int dim = v.dim, inter = v.inter_dim;
  const float eps = static_cast<float>(v.norm_eps);
  Scratch& s = scratch_;
  const auto rows = [&](const std::function<void(int64_t)>& fn) {
    pool_.ParallelFor(n, 32, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) fn(i);
    });
  };
  const auto norm = [&](const std::vector<float>& scale) {
    rows([&](int64_t i) { kernels::RmsNorm(&x[static_cast<size_t>(i) * dim], scale.data(), dim, eps, &s.normed[static_cast<size_t>(i) * dim]); });
  };
  const auto add_projection = [&](const std::vector<float>* bias) {  // x += proj (+ bias), row by row
    rows([&](int64_t i) {
      float* xi = &x[static_cast<size_t>(i) * dim];
      const float* pi = &s.proj[static_cast<size_t>(i) * dim];
      for (int c = 0; c < dim; ++c) xi[c] += bias != nullptr ? pi[c] + (*bias)[static_cast<size_t>(c)] : pi[c];
    });
  };
  norm(w.norm1);
  kernels::MatMul(w.wqkv, s.normed.data(), n, dim, s.qkv.data(), 3 * dim, pool_);
  rows([&](int64_t i) { AddBias(&s.qkv[static_cast<size_t>(i) * 3 * dim], 1, 3 * dim, w.wqkv_bias); });
  Attention(s.qkv.data(), n, vit_w, s.attn.data());
  kernels::MatMul(w.wo, s.attn.data(), n, dim, s.proj.data(), dim, pool_);
  add_projection(&w.wo_bias);
  norm(w.norm2);
  kernels::MatMul(w.w1, s.normed.data(), n, dim, s.gate_up.data(), 2 * inter, pool_);
  rows([&](int64_t i) {  // silu(gate) * up
    const float* g = &s.gate_up[static_cast<size_t>(i) * 2 * inter];
    kernels::SwiGlu(g, g + inter, inter, 0.0f, 1.0f, &s.act[static_cast<size_t>(i) * inter]);
  });
  kernels::MatMul(w.w2, s.act.data(), n, inter, s.proj.data(), dim, pool_);
  add_projection(nullptr);
}

base::Result<std::vector<float>> VisionTower::RunVit(std::span<const float> patches, int vit_h, int vit_w) {
  const model::VisionTowerConfig& v = model_.config().vision;
  if (!v.present()) return base::MakeError(ErrorCode::kFailedPrecondition, "this model has no vision tower");
  const int64_t patch = 3LL * v.patch_size * v.patch_size;
  if (vit_h <= 0 || vit_w <= 0 || static_cast<int64_t>(patches.size()) != static_cast<int64_t>(vit_h) * vit_w * patch) {
    return base::MakeError(ErrorCode::kInvalidArgument,
                           fmt::format("{} patch values for a {}x{} grid of {}-value patches", patches.size(), vit_h,
                                       vit_w, patch));
  }
  const model::VisionWeights& w = model_.weights().vision;
  const int n = vit_h * vit_w;
  std::vector<float> x(static_cast<size_t>(n) * v.dim);
  kernels::MatMul(w.patch_embed, patches.data(), n, patch, x.data(), v.dim, pool_);
  AddBias(x.data(), n, v.dim, w.patch_bias);
  scratch_.Size(n, v.dim, v.inter_dim);
  for (const model::VisionBlockWeights& block : w.blocks) Block(block, n, vit_w, x);
  std::vector<float> out(x.size());
  for (int i = 0; i < n; ++i) {
    kernels::RmsNorm(&x[static_cast<size_t>(i) * v.dim], w.norm.data(), v.dim, static_cast<float>(v.norm_eps),
                     &out[static_cast<size_t>(i) * v.dim]);
  }
  return out;
}

std::vector<float> VisionTower::RunAligner(std::span<const float> vit, int vit_h, int vit_w) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const model::VisionWeights& w = model_.weights().vision;
  const int r = v.downsample_ratio, dim = v.dim;
  const int rows = (vit_h + r - 1) / r, cols = (vit_w + r - 1) / r, cells = rows * cols;
  const int64_t merged = static_cast<int64_t>(dim) * r * r, d = model_.config().hidden_size;
  std::vector<float> in(static_cast<size_t>(cells * merged), 0.0f);
  for (int cell = 0; cell < cells; ++cell) {
    float* m = &in[static_cast<size_t>(cell * merged)];
    for (int ki = 0; ki < r; ++ki) {
      for (int kj = 0; kj < r; ++kj) {
        const int y = cell / cols * r + ki, x = cell % cols * r + kj;
        if (y >= vit_h || x >= vit_w) continue;  // zero padding past the bottom/right edge
        const float* src = &vit[static_cast<size_t>(y * vit_w + x) * dim];
        for (int c = 0; c < dim; ++c) m[static_cast<int64_t>(c) * r * r + ki * r + kj] = src[c];
      }
    }
  }
  std::vector<float> hidden(static_cast<size_t>(cells * d)), out(static_cast<size_t>(cells * d));
  kernels::MatMul(w.aligner_w1, in.data(), cells, merged, hidden.data(), d, pool_);
  AddBias(hidden.data(), cells, d, w.aligner_b1);
  for (float& h : hidden) h = Gelu(h);
  kernels::MatMul(w.aligner_w2, hidden.data(), cells, d, out.data(), d, pool_);
  AddBias(out.data(), cells, d, w.aligner_b2);
  return out;
}

base::Result<std::vector<float>> VisionTower::Encode(std::span<const float> patches, int vit_h, int vit_w) {
  FS_ASSIGN_OR_RETURN(std::vector<float> vit, RunVit(patches, vit_h, vit_w));
  return RunAligner(vit, vit_h, vit_w);
}

base::Result<std::vector<float>> SpanEmbeddings(const Model& model, std::span<const uint8_t> roles,
                                                std::span<const int32_t> image_rows,
                                                std::span<const float> aligner_rows) {
  const model::VisionWeights& w = model.weights().vision;
  const int64_t d = model.config().hidden_size;
  const int64_t available = static_cast<int64_t>(aligner_rows.size()) / d;
  std::vector<float> out(roles.size() * static_cast<size_t>(d));
  size_t next_image = 0;
  for (size_t i = 0; i < roles.size(); ++i) {
    const float* src = nullptr;
    switch (roles[i]) {
      case 0: src = w.image_start.data(); break;
      case 1: src = w.image_pad.empty() ? nullptr : w.image_pad.data(); break;
      case 2:
        if (next_image >= image_rows.size() || image_rows[next_image] < 0 || image_rows[next_image] >= available) {
          return base::MakeError(ErrorCode::kInvalidArgument, "image span and aligner rows do not match");
        }
        src = &aligner_rows[static_cast<size_t>(image_rows[next_image++] * d)];
        break;
      case 3: src = w.image_newline.data(); break;
      case 4: src = w.image_end.data(); break;
    }
    if (src == nullptr) return base::MakeError(ErrorCode::kInvalidArgument, "span role without an embedding");
    std::copy_n(src, d, &out[i * static_cast<size_t>(d)]);
  }
  return out;
}

}  // namespace flashserve::engine
