// ViT, aligner and span embeddings (engine/vision_tower.h).
#include "engine/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "base/huge_pages.h"
#include "kernels/activation/softmax_row.h"
#include "kernels/activation/swiglu.h"
#include "kernels/gemm/dense.h"
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
  const auto grow = [](base::AlignedVector<float>& v, int64_t size) {
    if (static_cast<int64_t>(v.size()) < size) base::GrowInHugePages(v, static_cast<size_t>(size));
  };
  grow(normed, int64_t{n} * dim);
  grow(qkv, int64_t{n} * 3 * dim);
  grow(attn, int64_t{n} * dim);
  grow(proj, int64_t{n} * dim);
  grow(gate_up, int64_t{n} * 2 * inter);
  grow(act, int64_t{n} * inter);
}

// Keys per packed block of values: a block's exponentials and values stay in L2 while its
// product runs.
constexpr int64_t kKeyBlock = 512;

void VisionTower::Scratch::SizeAttention(int n, int head_dim) {
  const size_t rows = static_cast<size_t>(n) * head_dim;
  for (base::AlignedVector<float>* x : {&q, &k, &v})
    if (x->size() < rows) x->resize(rows);
  const auto packed_keys = static_cast<size_t>(kernels::DensePackedSize(head_dim, n));
  const int64_t key_blocks = (n + kKeyBlock - 1) / kKeyBlock;
  const auto packed_values = static_cast<size_t>(key_blocks * kernels::DensePackedSize(kKeyBlock, head_dim));
  if (keys.size() < packed_keys) base::GrowInHugePages(keys, packed_keys);
  if (values.size() < packed_values) base::GrowInHugePages(values, packed_values);
}

// Full attention per head: the rotated keys packed once, the values in blocks of kKeyBlock keys;
// then per block of kQueryRows queries (in one thread's cache) scores = q K^T, the row
// exponentials, their products with the value blocks summed in key order, divided by the rows' sums.
void VisionTower::Attention(const float* qkv, int n, int vit_w, float* out) {
  constexpr int64_t kQueryRows = 56;
  const model::VisionTowerConfig& v = model_.config().vision;
  const int hd = v.head_dim(), dim = v.dim;
  const RopeAngles angles = Angles(n, vit_w, hd, v.rope_theta);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  Scratch& s = scratch_;
  s.SizeAttention(n, hd);
  const int64_t blocks = (n + kQueryRows - 1) / kQueryRows, key_blocks = (n + kKeyBlock - 1) / kKeyBlock;
  const int64_t value_block_size = kernels::DensePackedSize(kKeyBlock, hd);
  for (int h = 0; h < v.num_heads; ++h) {
    pool_.ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* row = qkv + i * 3 * dim + static_cast<int64_t>(h) * hd;
        std::copy_n(row, hd, &s.q[static_cast<size_t>(i) * hd]);
        std::copy_n(row + dim, hd, &s.k[static_cast<size_t>(i) * hd]);
        std::copy_n(row + 2 * dim, hd, &s.v[static_cast<size_t>(i) * hd]);
        Rotate(&s.q[static_cast<size_t>(i) * hd], angles, static_cast<int>(i));
        Rotate(&s.k[static_cast<size_t>(i) * hd], angles, static_cast<int>(i));
      }
      kernels::PackDenseRows(s.k.data(), n, hd, hd, s.keys.data(), begin, end);
    });
    pool_.ParallelFor(key_blocks, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t j0 = b * kKeyBlock;
        kernels::PackDenseCols(&s.v[static_cast<size_t>(j0 * hd)], std::min<int64_t>(kKeyBlock, n - j0), hd, hd,
                               &s.values[static_cast<size_t>(b * value_block_size)]);
      }
    });
    pool_.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
      thread_local base::AlignedVector<float> scores, o, sums;
      scores.resize(static_cast<size_t>(kQueryRows * n));
      o.resize(static_cast<size_t>(kQueryRows * hd));
      sums.resize(static_cast<size_t>(kQueryRows));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t i0 = b * kQueryRows, rows = std::min<int64_t>(kQueryRows, n - i0);
        kernels::DenseProduct(&s.q[static_cast<size_t>(i0 * hd)], rows, hd, s.keys.data(), hd, n, scores.data(), n, false);
        for (int64_t r = 0; r < rows; ++r) sums[static_cast<size_t>(r)] = kernels::ExpShiftedSum(&scores[static_cast<size_t>(r * n)], n, scale);
        for (int64_t kb = 0; kb < key_blocks; ++kb) {
          const int64_t j0 = kb * kKeyBlock;
          kernels::DenseProduct(&scores[static_cast<size_t>(j0)], rows, n, &s.values[static_cast<size_t>(kb * value_block_size)],
                                std::min<int64_t>(kKeyBlock, n - j0), hd, o.data(), hd, kb > 0);
        }
        for (int64_t r = 0; r < rows; ++r) {
          float* dst = out + (i0 + r) * dim + static_cast<int64_t>(h) * hd;
          for (int c = 0; c < hd; ++c) dst[c] = o[static_cast<size_t>(r * hd + c)] / sums[static_cast<size_t>(r)];
        }
      }
    });
  }
}

void VisionTower::Block(const model::VisionBlockWeights& w, std::span<const Segment> segments, std::vector<float>& x) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const int dim = v.dim, inter = v.inter_dim, n = segments.back().first + segments.back().n;
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
  kernels::DenseMatMul(w.wqkv, s.normed.data(), n, dim, s.qkv.data(), 3 * dim, s.weights, pool_);
  rows([&](int64_t i) { AddBias(&s.qkv[static_cast<size_t>(i) * 3 * dim], 1, 3 * dim, w.wqkv_bias); });
  for (const Segment& p : segments)
    Attention(&s.qkv[static_cast<size_t>(p.first) * 3 * dim], p.n, p.vit_w, &s.attn[static_cast<size_t>(p.first) * dim]);
  kernels::DenseMatMul(w.wo, s.attn.data(), n, dim, s.proj.data(), dim, s.weights, pool_);
  add_projection(&w.wo_bias);
  norm(w.norm2);
  kernels::DenseMatMul(w.w1, s.normed.data(), n, dim, s.gate_up.data(), 2 * inter, s.weights, pool_);
  rows([&](int64_t i) {  // silu(gate) * up
    const float* g = &s.gate_up[static_cast<size_t>(i) * 2 * inter];
    kernels::SwiGlu(g, g + inter, inter, 0.0f, 1.0f, &s.act[static_cast<size_t>(i) * inter]);
  });
  kernels::DenseMatMul(w.w2, s.act.data(), n, inter, s.proj.data(), dim, s.weights, pool_);
  add_projection(nullptr);
}

base::Status VisionTower::Check(const PicturePatches& picture) const {
  const model::VisionTowerConfig& v = model_.config().vision;
  if (!v.present()) return base::MakeError(ErrorCode::kFailedPrecondition, "this model has no vision tower");
  const int64_t patch = 3LL * v.patch_size * v.patch_size;
  if (picture.vit_h <= 0 || picture.vit_w <= 0 ||
      static_cast<int64_t>(picture.patches.size()) != static_cast<int64_t>(picture.vit_h) * picture.vit_w * patch) {
    return base::MakeError(ErrorCode::kInvalidArgument,
                           fmt::format("{} patch values for a {}x{} grid of {}-value patches", picture.patches.size(),
                                       picture.vit_h, picture.vit_w, patch));
  }
  return base::Status::Ok();
}

std::vector<float> VisionTower::RunVitRows(std::span<const PicturePatches> pictures, std::span<const Segment> segments) {
  const model::VisionTowerConfig& v = model_.config().vision;
  const model::VisionWeights& w = model_.weights().vision;
  const int64_t patch = 3LL * v.patch_size * v.patch_size;
  const int n = segments.back().first + segments.back().n;
  std::vector<float> x(static_cast<size_t>(n) * v.dim);
  for (size_t i = 0; i < pictures.size(); ++i) {
    kernels::DenseMatMul(w.patch_embed, pictures[i].patches.data(), segments[i].n, patch,
                         &x[static_cast<size_t>(segments[i].first) * v.dim], v.dim, scratch_.weights, pool_);
  }
  AddBias(x.data(), n, v.dim, w.patch_bias);
  scratch_.Size(n, v.dim, v.inter_dim);
  for (const model::VisionBlockWeights& block : w.blocks) Block(block, segments, x);
  std::vector<float> out(x.size());
  for (int i = 0; i < n; ++i) {
    kernels::RmsNorm(&x[static_cast<size_t>(i) * v.dim], w.norm.data(), v.dim, static_cast<float>(v.norm_eps),
                     &out[static_cast<size_t>(i) * v.dim]);
  }
  return out;
}

base::Result<std::vector<float>> VisionTower::RunVit(std::span<const float> patches, int vit_h, int vit_w) {
  const PicturePatches picture{patches, vit_h, vit_w};
  FS_RETURN_IF_ERROR(Check(picture));
  const Segment segment{0, vit_h * vit_w, vit_w};
  return RunVitRows({&picture, 1}, {&segment, 1});
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
  kernels::DenseMatMul(w.aligner_w1, in.data(), cells, merged, hidden.data(), d, scratch_.weights, pool_);
  AddBias(hidden.data(), cells, d, w.aligner_b1);
  for (float& h : hidden) h = Gelu(h);
  kernels::DenseMatMul(w.aligner_w2, hidden.data(), cells, d, out.data(), d, scratch_.weights, pool_);
  AddBias(out.data(), cells, d, w.aligner_b2);
  return out;
}

void VisionTower::ReleaseScratch() { scratch_ = Scratch{}; }

base::Result<std::vector<float>> VisionTower::Encode(std::span<const float> patches, int vit_h, int vit_w) {
  FS_ASSIGN_OR_RETURN(std::vector<float> vit, RunVit(patches, vit_h, vit_w));
  return RunAligner(vit, vit_h, vit_w);
}

base::Result<std::vector<std::vector<float>>> VisionTower::EncodeBatch(std::span<const PicturePatches> pictures) {
  std::vector<std::vector<float>> out;
  if (pictures.empty()) return out;
  std::vector<Segment> segments;
  int rows = 0;
  for (const PicturePatches& picture : pictures) {
    FS_RETURN_IF_ERROR(Check(picture));
    segments.push_back({rows, picture.vit_h * picture.vit_w, picture.vit_w});
    rows += picture.vit_h * picture.vit_w;
  }
  const std::vector<float> vit = RunVitRows(pictures, segments);
  const int dim = model_.config().vision.dim;
  for (size_t i = 0; i < pictures.size(); ++i) {
    const std::span<const float> own(&vit[static_cast<size_t>(segments[i].first) * dim], static_cast<size_t>(segments[i].n) * dim);
    out.push_back(RunAligner(own, pictures[i].vit_h, pictures[i].vit_w));
  }
  return out;
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

std::optional<std::pair<int64_t, int64_t>> BidirectionalPart(const Model& model, std::span<const uint8_t> roles) {
  const model::ModelConfig& c = model.config();
  if (!c.vision.present() || c.is_v41()) return std::nullopt;
  constexpr uint8_t kStartRole = 0, kEndRole = 4;  // vision::SpanRole kStart, kEnd (as in SpanEmbeddings)
  const auto start = std::find(roles.begin(), roles.end(), kStartRole);
  const auto end = std::find(start, roles.end(), kEndRole);
  if (end == roles.end()) return std::nullopt;
  return std::pair<int64_t, int64_t>(start - roles.begin(), end - roles.begin() + 1);
}

}  // namespace flashserve::engine
