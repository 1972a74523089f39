// ViT, aligner and span embeddings (engine/vision_tower.h).
#include "engine/vision_tower.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kernels/gemm/matmul.h"
#include "kernels/norm_rope/norm_rope.h"

namespace flashserve::engine {
namespace {

using base::ErrorCode;

void AddBias(float* y, int64_t rows, int64_t cols, const std::vector<float>& bias) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[static_cast<size_t>(c)];
}

// Axial 2D RoPE on one head (rotate-half over its two halves): angle j of the first half of
// the rope dims follows the patch row, the second half the patch column.
void Rotate(float* x, int head_dim, int row, int col, const std::vector<double>& inv_freq) {
  const int half = head_dim / 2, quarter = half / 2;
  for (int j = 0; j < half; ++j) {
    const float angle = static_cast<float>(j < quarter ? row : col) * static_cast<float>(inv_freq[static_cast<size_t>(j % quarter)]);
    const float c = std::cos(angle), s = std::sin(angle);
    const float a = x[j], b = x[j + half];
    x[j] = a * c - b * s;
    x[j + half] = b * c + a * s;
  }
}

float Gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

}  // namespace

VisionTower::VisionTower(const Model& model, base::ThreadPool& pool) : model_(model), pool_(pool) {}

void VisionTower::Attention(const float* qkv, int n, int vit_w, float* out) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const int hd = v.head_dim(), dim = v.dim;
  std::vector<double> inv_freq(static_cast<size_t>(hd / 4));
  for (size_t j = 0; j < inv_freq.size(); ++j) {
    inv_freq[j] = 1.0 / std::pow(v.rope_theta, static_cast<double>(2 * j) / (hd / 2));
  }
  pool_.ParallelTasks(v.num_heads, [&](int64_t head_begin, int64_t head_end) {
    std::vector<float> q(static_cast<size_t>(n) * hd), k(q.size()), scores(static_cast<size_t>(n));
    for (int64_t h = head_begin; h < head_end; ++h) {
      for (int i = 0; i < n; ++i) {
        std::copy_n(qkv + static_cast<int64_t>(i) * 3 * dim + h * hd, hd, &q[static_cast<size_t>(i) * hd]);
        std::copy_n(qkv + static_cast<int64_t>(i) * 3 * dim + dim + h * hd, hd, &k[static_cast<size_t>(i) * hd]);
        Rotate(&q[static_cast<size_t>(i) * hd], hd, i / vit_w, i % vit_w, inv_freq);
        Rotate(&k[static_cast<size_t>(i) * hd], hd, i / vit_w, i % vit_w, inv_freq);
      }
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (int i = 0; i < n; ++i) {
        float top = -INFINITY;
        for (int j = 0; j < n; ++j) {
          float dot = 0.0f;
          for (int c = 0; c < hd; ++c) dot += q[static_cast<size_t>(i) * hd + c] * k[static_cast<size_t>(j) * hd + c];
          scores[static_cast<size_t>(j)] = dot * scale;
          top = std::max(top, scores[static_cast<size_t>(j)]);
        }
        float sum = 0.0f;
        for (float& s : scores) sum += (s = std::exp(s - top));
        float* o = out + static_cast<int64_t>(i) * dim + h * hd;
        std::fill_n(o, hd, 0.0f);
        for (int j = 0; j < n; ++j) {
          const float p = scores[static_cast<size_t>(j)] / sum;
          const float* vj = qkv + static_cast<int64_t>(j) * 3 * dim + 2 * dim + h * hd;
          for (int c = 0; c < hd; ++c) o[c] += p * vj[c];
        }
      }
    }
  });
}

void VisionTower::Block(const model::VisionBlockWeights& w, int n, int vit_w, std::vector<float>& x) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const int dim = v.dim, inter = v.inter_dim;
  const float eps = static_cast<float>(v.norm_eps);
  std::vector<float> normed(x.size()), qkv(static_cast<size_t>(n) * 3 * dim), attn(x.size()), proj(x.size());
  for (int i = 0; i < n; ++i) kernels::RmsNorm(&x[static_cast<size_t>(i) * dim], w.norm1.data(), dim, eps, &normed[static_cast<size_t>(i) * dim]);
  kernels::MatMul(w.wqkv, normed.data(), n, dim, qkv.data(), 3 * dim, pool_);
  AddBias(qkv.data(), n, 3 * dim, w.wqkv_bias);
  Attention(qkv.data(), n, vit_w, attn.data());
  kernels::MatMul(w.wo, attn.data(), n, dim, proj.data(), dim, pool_);
  AddBias(proj.data(), n, dim, w.wo_bias);
  for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  for (int i = 0; i < n; ++i) kernels::RmsNorm(&x[static_cast<size_t>(i) * dim], w.norm2.data(), dim, eps, &normed[static_cast<size_t>(i) * dim]);
  std::vector<float> gate_up(static_cast<size_t>(n) * 2 * inter), act(static_cast<size_t>(n) * inter);
  kernels::MatMul(w.w1, normed.data(), n, dim, gate_up.data(), 2 * inter, pool_);
  for (int i = 0; i < n; ++i) {
    const float* g = &gate_up[static_cast<size_t>(i) * 2 * inter];
    for (int c = 0; c < inter; ++c) act[static_cast<size_t>(i) * inter + c] = g[c] / (1.0f + std::exp(-g[c])) * g[inter + c];
  }
  kernels::MatMul(w.w2, act.data(), n, inter, proj.data(), dim, pool_);
  for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
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
