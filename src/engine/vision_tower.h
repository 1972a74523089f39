// The DeepSeek-V4 vision tower on CPU: the ViT (linear patch embedding; blocks of RMSNorm ->
// full bidirectional attention with axial 2D RoPE -> RMSNorm -> SwiGLU; final RMSNorm) and the
// aligner (ratio x ratio channel-major merge, zero-padded at the bottom and right edges, then a
// two-layer GELU MLP into the model width), plus the embeddings of a whole placeholder span.
// Activations in f32; products on the dense kernels (kernels/gemm/dense.h), attention fused per
// block of queries. One tower per calling thread; it spreads work over the given pool.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/aligned_vector.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/model.h"

namespace flashserve::engine {

// Embeddings of every span position ([roles.size()][hidden]): the learned start, newline, end
// and pad vectors, and aligner row image_rows[k] at the k-th image position. Roles are
// vision::SpanRole values (0 start, 1 pad, 2 image, 3 newline, 4 end). Any thread.
base::Result<std::vector<float>> SpanEmbeddings(const Model& model, std::span<const uint8_t> roles,
                                                std::span<const int32_t> image_rows,
                                                std::span<const float> aligner_rows);

// The part of a span computed with a bidirectional raw window, as offsets [first, second) into
// it: START to END on models with Vision-Exp's layout (V4 with a tower), nothing on V4.1 (or
// when the roles hold no START..END). Any thread.
std::optional<std::pair<int64_t, int64_t>> BidirectionalPart(const Model& model, std::span<const uint8_t> roles);

// One picture's patches ([vit_h * vit_w][3 * p * p], vision::PatchValues) and grid.
struct PicturePatches {
  std::span<const float> patches;
  int vit_h = 0, vit_w = 0;
};

class VisionTower {
 public:
  VisionTower(const Model& model, base::ThreadPool& pool);

  // kFailedPrecondition when the model has no tower, kInvalidArgument when the patches do not
  // fill the grid.
  base::Status Check(const PicturePatches& picture) const;

  // patches: [vit_h * vit_w][3 * p * p] (vision::PatchValues). Returns [vit_h * vit_w][dim].
  // kFailedPrecondition when the model has no tower, kInvalidArgument for a bad size.
  base::Result<std::vector<float>> RunVit(std::span<const float> patches, int vit_h, int vit_w);
  // ViT output -> aligner rows [ceil(vit_h / r) * ceil(vit_w / r)][hidden], reading order.
  std::vector<float> RunAligner(std::span<const float> vit, int vit_h, int vit_w);
  // RunVit then RunAligner.
  base::Result<std::vector<float>> Encode(std::span<const float> patches, int vit_h, int vit_w);
  // Several pictures at once: their rows share every linear product (the weights are read once
  // per layer for all of them), attention stays within each picture. Each picture's rows are
  // bit for bit those of Encode alone. Fails (with no output) if any picture fails Check.
  base::Result<std::vector<std::vector<float>>> EncodeBatch(std::span<const PicturePatches> pictures);
  // Frees the activations kept between runs (they grow to the largest run).
  void ReleaseScratch();

  // engine::SpanEmbeddings for this tower's model.
  base::Result<std::vector<float>> SpanEmbeddings(std::span<const uint8_t> roles, std::span<const int32_t> image_rows,
                                                  std::span<const float> aligner_rows) const {
    return engine::SpanEmbeddings(model_, roles, image_rows, aligner_rows);
  }

 private:
  void Attention(const float* qkv, int n, int vit_w, float* out);
  struct Segment {  // one picture's rows in a batch
    int first = 0, n = 0, vit_w = 0;
  };
  void Block(const model::VisionBlockWeights& w, std::span<const Segment> segments, std::vector<float>& x);
  // The ViT over the pictures' rows stacked: [sum of n][dim].
  std::vector<float> RunVitRows(std::span<const PicturePatches> pictures, std::span<const Segment> segments);

  // Activations of one batch, kept across layers and pictures (no page faults per layer).
  struct Scratch {
    base::AlignedVector<float> normed, qkv, attn, proj, gate_up, act;  // [n][...] per block
    base::AlignedVector<float> q, k, v, keys, values;  // one head: rotated rows, packed keys / values
    base::AlignedVector<float> weights;                // one weight matrix, packed (kernels/gemm/dense.h)
    void Size(int n, int dim, int inter);
    void SizeAttention(int n, int head_dim);
  };

  const Model& model_;
  base::ThreadPool& pool_;
  Scratch scratch_;
};

}  // namespace flashserve::engine
