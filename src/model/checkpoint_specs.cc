// Tensor list of a V4 checkpoint (model/checkpoint_specs.h; names: v4-architecture.md 6.2).
#include "model/checkpoint_specs.h"

#include <cmath>

#include "model/layer_plan.h"

namespace flashserve::model {
namespace {

struct Builder {
  const ModelConfig& c;
  float sharp;
  std::vector<TensorSpec> out;

  void Linear(const std::string& name, TensorRole role, int64_t rows, int64_t cols, float mult = 1.0f) {
    out.push_back({name, role, {rows, cols}, mult / std::sqrt(static_cast<float>(cols))});
  }
  void Norm(const std::string& name, int64_t n) { out.push_back({name, TensorRole::kNormWeight, {n}, 0.1f}); }
  void F32(const std::string& name, std::vector<int64_t> shape, float std) {
    out.push_back({name, TensorRole::kF32, std::move(shape), std});
  }
  void Hc(const std::string& p, int rows, int scales) {
    F32(p + "fn", {rows, c.hc_dim()}, 1.0f / std::sqrt(static_cast<float>(c.hc_dim())));
    F32(p + "base", {rows}, 0.5f);
    F32(p + "scale", {scales}, -1.0f);
  }
  void Compressor(const std::string& p, int ratio, int dim, int coff) {
    Linear(p + "wkv", TensorRole::kFloatLinear, coff * dim, c.hidden_size);
    Linear(p + "wgate", TensorRole::kFloatLinear, coff * dim, c.hidden_size);
    F32(p + "ape", {ratio, coff * dim}, 0.5f);
    Norm(p + "norm.weight", dim);
  }
  // V4.1: compressor on KV sources (no ape, no wgate at ratio 1), indexer on index sources,
  // index-key projection on KV sources.
  void V41Branches(const LayerSpec& s, const std::string& p) {
    if (s.owns_compressor) {
      Linear(p + "compressor.wkv", TensorRole::kFloatLinear, c.head_dim, c.hidden_size);
      if (s.compress_ratio > 1) Linear(p + "compressor.wgate", TensorRole::kFloatLinear, c.head_dim, c.hidden_size);
      Norm(p + "compressor.norm.weight", c.head_dim);
    }
    if (!s.runs_indexer) return;
    Linear(p + "indexer.wq_b", TensorRole::kDenseLinear, static_cast<int64_t>(c.index_n_heads) * c.index_head_dim,
           c.q_lora_rank);
    Linear(p + "indexer.weights_proj", TensorRole::kFloatLinear, c.index_n_heads, c.hidden_size, sharp);
    if (s.owns_index_keys) {
      Linear(p + "indexer.wk", TensorRole::kFloatLinear, c.index_head_dim, c.head_dim);
      Norm(p + "indexer.k_norm.weight", c.index_head_dim);
    }
  }
  void Attention(const LayerSpec& s) {
    const std::string p = s.prefix + "attn.";
    const int64_t d = c.hidden_size, hd = static_cast<int64_t>(c.num_heads) * c.head_dim;
    Linear(p + "wq_a", TensorRole::kDenseLinear, c.q_lora_rank, d);
    Norm(p + "q_norm.weight", c.q_lora_rank);
    Linear(p + "wq_b", TensorRole::kDenseLinear, hd, c.q_lora_rank);
    Linear(p + "wkv", TensorRole::kDenseLinear, c.head_dim, d);
    Norm(p + "kv_norm.weight", c.head_dim);
    Linear(p + "wo_a", TensorRole::kDenseLinear, static_cast<int64_t>(c.o_groups) * c.o_lora_rank, hd / c.o_groups);
    Linear(p + "wo_b", TensorRole::kDenseLinear, d, static_cast<int64_t>(c.o_groups) * c.o_lora_rank);
    F32(p + "attn_sink", {c.num_heads}, 1.0f);
    if (c.is_v41()) return V41Branches(s, p);
    if (s.compress_ratio > 0) Compressor(p + "compressor.", s.compress_ratio, c.head_dim, s.attention == AttentionKind::kCsa ? 2 : 1);
    if (s.attention == AttentionKind::kCsa) {
      Linear(p + "indexer.wq_b", TensorRole::kDenseLinear, static_cast<int64_t>(c.index_n_heads) * c.index_head_dim,
             c.q_lora_rank);
      Linear(p + "indexer.weights_proj", TensorRole::kFloatLinear, c.index_n_heads, d, sharp);
      Compressor(p + "indexer.compressor.", 4, c.index_head_dim, 2);
    }
  }
  // V4.1 Engram (v4-architecture.md 5.4): the n-gram table, the key/value projection of the
  // gathered rows and the gate weights.
  void Engram(const std::string& p, int index) {
    const EngramConfig& e = c.engram;
    const int64_t cols = static_cast<int64_t>(e.max_ngram_size - 1) * e.num_heads * e.head_dim;
    out.push_back({p + "embed", TensorRole::kEngramTable, {e.num_embeddings[static_cast<size_t>(index)], e.head_dim}, 1.0f});
    Linear(p + "wkv", TensorRole::kDenseLinear, (c.hc_mult + 1) * c.hidden_size, cols);
    F32(p + "q_weight", {c.hc_mult, c.hidden_size}, -1.0f);
    F32(p + "k_weight", {c.hc_mult, c.hidden_size}, -1.0f);
  }
  // The vision tower, aligner and span vectors (names as the released checkpoints; vLLM's
  // deepseek_v4/common/vision.py reads the same).
  void Vision() {
    const VisionTowerConfig& v = c.vision;
    const int64_t dim = v.dim, patch = 3LL * v.patch_size * v.patch_size;
    Linear("vision.patch_embed.proj", TensorRole::kFloatLinear, dim, patch);
    F32("vision.patch_embed.proj.bias", {dim}, 0.02f);
    for (int i = 0; i < v.num_layers; ++i) {
      const std::string p = "vision.blocks." + std::to_string(i) + ".";
      F32(p + "norm1.weight", {dim}, -1.0f);
      F32(p + "norm2.weight", {dim}, -1.0f);
      Linear(p + "attn.wqkv", TensorRole::kFloatLinear, 3 * dim, dim);
      F32(p + "attn.wqkv.bias", {3 * dim}, 0.02f);
      Linear(p + "attn.wo", TensorRole::kFloatLinear, dim, dim, 0.5f);
      F32(p + "attn.wo.bias", {dim}, 0.02f);
      Linear(p + "mlp.w1", TensorRole::kFloatLinear, 2LL * v.inter_dim, dim);
      Linear(p + "mlp.w2", TensorRole::kFloatLinear, dim, v.inter_dim, 0.5f);
    }
    F32("vision.norm.weight", {dim}, -1.0f);
    const int64_t merged = dim * v.downsample_ratio * v.downsample_ratio, d = c.hidden_size;
    Linear("aligner.w1", TensorRole::kFloatLinear, d, merged);
    F32("aligner.w1.bias", {d}, 0.02f);
    Linear("aligner.w2", TensorRole::kFloatLinear, d, d);
    F32("aligner.w2.bias", {d}, 0.02f);
    for (const char* name : {"image_start", "image_end", "image_newline"}) F32(name, {d}, 1.0f);
    if (!c.is_v41()) F32("image_pad", {d}, 1.0f);
  }
  void DsparkStage(const LayerSpec& s) {
    const int64_t d = c.hidden_size, r = c.dspark.markov_rank;
    if (s.dspark_stage == 0) {
      Linear(s.prefix + "main_proj", TensorRole::kDenseLinear, d, c.dspark.stages() * d);
      Norm(s.prefix + "main_norm.weight", d);
    }
    if (s.dspark_stage + 1 < c.dspark.stages()) return;
    Norm(s.prefix + "norm.weight", d);
    Hc(s.prefix + "hc_head_", c.hc_mult, 1);
    Linear(s.prefix + "markov_head.markov_w1", TensorRole::kFloatLinear, c.vocab_size, r);
    Linear(s.prefix + "markov_head.markov_w2", TensorRole::kFloatLinear, c.vocab_size, r);
    Linear(s.prefix + "confidence_head.proj", TensorRole::kFloatLinear, 1, d + r);
  }
  void Moe(const LayerSpec& s) {
    const std::string p = s.prefix + "ffn.";
    const int64_t d = c.hidden_size, f = c.moe_inter_dim;
    Linear(p + "gate", TensorRole::kFloatLinear, c.num_routed_experts, d, sharp);
    if (s.hash_moe) {
      out.push_back({p + "gate.tid2eid", TensorRole::kTid2eid, {c.vocab_size, c.num_experts_per_token}, 0});
    } else {
      F32(p + "gate.bias", {c.num_routed_experts}, 0.1f);
    }
    if (c.is_v41() || c.vision.present()) F32(p + "gate.bias_vl", {c.num_routed_experts}, 0.1f);
    for (int e = 0; e < c.num_routed_experts; ++e) {
      const std::string ep = p + "experts." + std::to_string(e) + ".";
      Linear(ep + "w1", TensorRole::kExpertLinear, f, d);
      Linear(ep + "w3", TensorRole::kExpertLinear, f, d);
      Linear(ep + "w2", TensorRole::kExpertLinear, d, f);
    }
    Linear(p + "shared_experts.w1", TensorRole::kDenseLinear, f, d);
    Linear(p + "shared_experts.w3", TensorRole::kDenseLinear, f, d);
    Linear(p + "shared_experts.w2", TensorRole::kDenseLinear, d, f);
  }
};

}  // namespace

int EngramIndex(const ModelConfig& c, int layer) {
  const auto& ids = c.engram.layer_ids;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == layer) return static_cast<int>(i);
  return -1;
}

std::vector<TensorSpec> CheckpointTensorSpecs(const ModelConfig& c, float sharp) {
  Builder b{c, sharp, {}};
  const int64_t d = c.hidden_size;
  b.out.push_back({"embed", TensorRole::kFloatLinear, {c.vocab_size, d}, 1.0f});
  b.Linear("head", TensorRole::kFloatLinear, c.vocab_size, d, sharp);
  b.Norm("norm.weight", d);
  if (!c.is_v41()) b.Hc("hc_head_", c.hc_mult, 1);
  for (const LayerSpec& s : BuildLayerPlan(c)) {
    b.Norm(s.prefix + "attn_norm.weight", d);
    b.Norm(s.prefix + "ffn_norm.weight", d);
    b.Hc(s.prefix + "hc_attn_", c.hc_mix(), 3);
    b.Hc(s.prefix + "hc_ffn_", c.hc_mix(), 3);
    b.Attention(s);
    b.Moe(s);
    if (const int e = EngramIndex(c, s.index); e >= 0) b.Engram(s.prefix + "engram.", e);
    if (s.dspark_stage >= 0) b.DsparkStage(s);
    if (s.is_mtp && s.dspark_stage < 0) {
      b.Linear(s.prefix + "e_proj", TensorRole::kDenseLinear, d, d);
      b.Linear(s.prefix + "h_proj", TensorRole::kDenseLinear, d, d);
      b.Norm(s.prefix + "enorm.weight", d);
      b.Norm(s.prefix + "hnorm.weight", d);
      b.Norm(s.prefix + "norm.weight", d);
      b.Hc(s.prefix + "hc_head_", c.hc_mult, 1);
    }
  }
  if (c.vision.present()) b.Vision();  // last: the text tensors keep their random streams
  return b.out;
}

}  // namespace flashserve::model
