// Loading and validating every DeepSeek-V4 tensor by its official name (model/weights.h,
// v4-architecture.md section 6).
#include "model/weights.h"

#include "base/log.h"
#include "model/checkpoint_specs.h"
#include "model/engram_layout.h"
#include "model/weight_reader.h"

namespace flashserve::model {

using base::Error;
using base::Result;
using base::Status;

namespace {

struct Loader {
  const ModelConfig& c;
  WeightReader& r;
  std::unique_ptr<EngramHasher> hasher = nullptr;  // V4.1 Engram table sizes, built on first use

  Status Compressor(const std::string& p, int ratio, int dim, int coff, CompressorWeights* w) {
    int64_t d = c.hidden_size;
    FS_ASSIGN_OR_RETURN(w->wkv, r.Linear(p + "wkv", coff * dim, d, LinearKind::kFloatOnly));
    FS_ASSIGN_OR_RETURN(w->wgate, r.Linear(p + "wgate", coff * dim, d, LinearKind::kFloatOnly));
    FS_ASSIGN_OR_RETURN(w->ape, r.Floats(p + "ape", {ratio, coff * dim}));
    FS_ASSIGN_OR_RETURN(w->norm, r.Floats(p + "norm.weight", {dim}));
    return Status::Ok();
  }

  // V4.1 (v4-architecture.md 6.3): a compressor only on KV sources (no ape; no wgate at ratio
  // 1), an indexer only on index sources, index-key projection only on KV sources.
  Status V41Branches(const LayerSpec& s, const std::string& p, AttentionWeights* w) {
    int64_t d = c.hidden_size;
    if (s.owns_compressor) {
      // Pooling sources keep wkv in float (the reference computes the pool in fp32); at ratio 1
      // it is a plain projection, so an FP8 tensor is accepted there too.
      const LinearKind wkv_kind = s.compress_ratio > 1 ? LinearKind::kFloatOnly : LinearKind::kDense;
      FS_ASSIGN_OR_RETURN(w->compressor.wkv, r.Linear(p + "compressor.wkv", c.head_dim, d, wkv_kind));
      if (s.compress_ratio > 1) {
        FS_ASSIGN_OR_RETURN(w->compressor.wgate, r.Linear(p + "compressor.wgate", c.head_dim, d, LinearKind::kFloatOnly));
      }
      FS_ASSIGN_OR_RETURN(w->compressor.norm, r.Floats(p + "compressor.norm.weight", {c.head_dim}));
    }
    if (!s.runs_indexer) return Status::Ok();
    std::string ip = p + "indexer.";
    FS_ASSIGN_OR_RETURN(w->indexer.wq_b, r.Linear(ip + "wq_b", static_cast<int64_t>(c.index_n_heads) * c.index_head_dim,
                                                  c.q_lora_rank, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->indexer.weights_proj, r.Linear(ip + "weights_proj", c.index_n_heads, d, LinearKind::kFloatOnly));
    if (s.owns_index_keys) {
      FS_ASSIGN_OR_RETURN(w->indexer.wk, r.Linear(ip + "wk", c.index_head_dim, c.head_dim, LinearKind::kFloatOnly));
      FS_ASSIGN_OR_RETURN(w->indexer.k_norm, r.Floats(ip + "k_norm.weight", {c.index_head_dim}));
    }
    return Status::Ok();
  }

  Status Attention(const LayerSpec& s, AttentionWeights* w) {
    std::string p = s.prefix + "attn.";
    int64_t d = c.hidden_size, hd = c.num_heads * static_cast<int64_t>(c.head_dim);
    int64_t group_in = hd / c.o_groups, lora = static_cast<int64_t>(c.o_groups) * c.o_lora_rank;
    FS_ASSIGN_OR_RETURN(w->wq_a, r.Linear(p + "wq_a", c.q_lora_rank, d, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->q_norm, r.Floats(p + "q_norm.weight", {c.q_lora_rank}));
    FS_ASSIGN_OR_RETURN(w->wq_b, r.Linear(p + "wq_b", hd, c.q_lora_rank, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->wkv, r.Linear(p + "wkv", c.head_dim, d, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->kv_norm, r.Floats(p + "kv_norm.weight", {c.head_dim}));
    FS_ASSIGN_OR_RETURN(w->wo_a, r.Linear(p + "wo_a", lora, group_in, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->wo_b, r.Linear(p + "wo_b", d, lora, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->attn_sink, r.Floats(p + "attn_sink", {c.num_heads}));
    if (c.is_v41()) return V41Branches(s, p, w);
    if (s.compress_ratio > 0) {
      int coff = s.attention == AttentionKind::kCsa ? 2 : 1;
      FS_RETURN_IF_ERROR(Compressor(p + "compressor.", s.compress_ratio, c.head_dim, coff, &w->compressor));
    }
    if (s.attention == AttentionKind::kCsa) {
      std::string ip = p + "indexer.";
      FS_ASSIGN_OR_RETURN(w->indexer.wq_b, r.Linear(ip + "wq_b", static_cast<int64_t>(c.index_n_heads) * c.index_head_dim,
                                                    c.q_lora_rank, LinearKind::kDense));
      FS_ASSIGN_OR_RETURN(w->indexer.weights_proj, r.Linear(ip + "weights_proj", c.index_n_heads, d, LinearKind::kFloatOnly));
      FS_RETURN_IF_ERROR(Compressor(ip + "compressor.", 4, c.index_head_dim, 2, &w->indexer.compressor));
    }
    return Status::Ok();
  }

  Status Expert(const std::string& p, LinearKind kind, ExpertWeights* w) {
    int64_t d = c.hidden_size, f = c.moe_inter_dim;
    FS_ASSIGN_OR_RETURN(w->w1, r.Linear(p + "w1", f, d, kind));
    FS_ASSIGN_OR_RETURN(w->w3, r.Linear(p + "w3", f, d, kind));
    FS_ASSIGN_OR_RETURN(w->w2, r.Linear(p + "w2", d, f, kind));
    return Status::Ok();
  }

  Status Moe(const LayerSpec& s, MoeWeights* w) {
    std::string p = s.prefix + "ffn.";
    FS_ASSIGN_OR_RETURN(w->gate, r.Linear(p + "gate", c.num_routed_experts, c.hidden_size, LinearKind::kFloatOnly));
    if (s.hash_moe) {
      FS_ASSIGN_OR_RETURN(w->tid2eid, r.Ints(p + "gate.tid2eid", {c.vocab_size, c.num_experts_per_token}, 0,
                                              c.num_routed_experts));
    } else {
      FS_ASSIGN_OR_RETURN(w->gate_bias, r.Floats(p + "gate.bias", {c.num_routed_experts}));
    }
    if (r.Has(p + "gate.bias_vl")) {  // V4.1, and Vision-Exp on every layer (hash layers too)
      FS_ASSIGN_OR_RETURN(w->gate_bias_vl, r.Floats(p + "gate.bias_vl", {c.num_routed_experts}));
    }
    w->experts.resize(static_cast<size_t>(c.num_routed_experts));
    for (int e = 0; e < c.num_routed_experts; ++e)
      FS_RETURN_IF_ERROR(Expert(p + "experts." + std::to_string(e) + ".", LinearKind::kExpert, &w->experts[e]));
    return Expert(p + "shared_experts.", LinearKind::kDense, &w->shared);
  }

  Status Hc(const std::string& p, int rows, int scales, HcWeights* w) {
    FS_ASSIGN_OR_RETURN(w->fn, r.Floats(p + "fn", {rows, c.hc_dim()}));
    FS_ASSIGN_OR_RETURN(w->base, r.Floats(p + "base", {rows}));
    FS_ASSIGN_OR_RETURN(w->scale, r.Floats(p + "scale", {scales}));
    return Status::Ok();
  }

  Status Engram(const std::string& p, int index, EngramWeights* w) {
    const EngramConfig& e = c.engram;
    const int64_t rows = e.num_embeddings[static_cast<size_t>(index)];
    const int64_t cols = static_cast<int64_t>(e.max_ngram_size - 1) * e.num_heads * e.head_dim;
    if (!hasher) hasher = std::make_unique<EngramHasher>(c);  // one layout for all Engram layers
    const int64_t needed = hasher->TableRows(index);
    if (rows < needed)
      return Error(base::ErrorCode::kBadConfig, "config.json: engram_num_embeddings[" + std::to_string(index) + "] = " +
                                                    std::to_string(rows) + " but the hash buckets need " +
                                                    std::to_string(needed) + " rows");
    FS_ASSIGN_OR_RETURN(w->embed, r.Linear(p + "embed", rows, e.head_dim, LinearKind::kRowTable));
    FS_ASSIGN_OR_RETURN(w->wkv, r.Linear(p + "wkv", (c.hc_mult + 1) * c.hidden_size, cols, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->q_weight, r.Floats(p + "q_weight", {c.hc_mult, c.hidden_size}));
    FS_ASSIGN_OR_RETURN(w->k_weight, r.Floats(p + "k_weight", {c.hc_mult, c.hidden_size}));
    return Status::Ok();
  }

  Status Bias(const std::string& name, int64_t n, std::vector<float>* out) {
    FS_ASSIGN_OR_RETURN(*out, r.Floats(name, {n}));
    return Status::Ok();
  }

  Status VisionBlock(const std::string& p, VisionBlockWeights* w) {
    const VisionTowerConfig& v = c.vision;
    FS_RETURN_IF_ERROR(Bias(p + "norm1.weight", v.dim, &w->norm1));
    FS_RETURN_IF_ERROR(Bias(p + "norm2.weight", v.dim, &w->norm2));
    FS_ASSIGN_OR_RETURN(w->wqkv, r.Linear(p + "attn.wqkv", 3LL * v.dim, v.dim, LinearKind::kFloatOnly));
    FS_RETURN_IF_ERROR(Bias(p + "attn.wqkv.bias", 3LL * v.dim, &w->wqkv_bias));
    FS_ASSIGN_OR_RETURN(w->wo, r.Linear(p + "attn.wo", v.dim, v.dim, LinearKind::kFloatOnly));
    FS_RETURN_IF_ERROR(Bias(p + "attn.wo.bias", v.dim, &w->wo_bias));
    FS_ASSIGN_OR_RETURN(w->w1, r.Linear(p + "mlp.w1", 2LL * v.inter_dim, v.dim, LinearKind::kFloatOnly));
    FS_ASSIGN_OR_RETURN(w->w2, r.Linear(p + "mlp.w2", v.dim, v.inter_dim, LinearKind::kFloatOnly));
    return Status::Ok();
  }

  Status Vision(VisionWeights* w) {
    const VisionTowerConfig& v = c.vision;
    const int64_t patch = 3LL * v.patch_size * v.patch_size, d = c.hidden_size;
    FS_ASSIGN_OR_RETURN(w->patch_embed, r.Linear("vision.patch_embed.proj", v.dim, patch, LinearKind::kFloatOnly));
    FS_RETURN_IF_ERROR(Bias("vision.patch_embed.proj.bias", v.dim, &w->patch_bias));
    w->blocks.resize(static_cast<size_t>(v.num_layers));
    for (int i = 0; i < v.num_layers; ++i) {
      FS_RETURN_IF_ERROR(VisionBlock("vision.blocks." + std::to_string(i) + ".", &w->blocks[static_cast<size_t>(i)]));
    }
    FS_RETURN_IF_ERROR(Bias("vision.norm.weight", v.dim, &w->norm));
    const int64_t merged = static_cast<int64_t>(v.dim) * v.downsample_ratio * v.downsample_ratio;
    FS_ASSIGN_OR_RETURN(w->aligner_w1, r.Linear("aligner.w1", d, merged, LinearKind::kFloatOnly));
    FS_RETURN_IF_ERROR(Bias("aligner.w1.bias", d, &w->aligner_b1));
    FS_ASSIGN_OR_RETURN(w->aligner_w2, r.Linear("aligner.w2", d, d, LinearKind::kFloatOnly));
    FS_RETURN_IF_ERROR(Bias("aligner.w2.bias", d, &w->aligner_b2));
    FS_RETURN_IF_ERROR(Bias("image_start", d, &w->image_start));
    FS_RETURN_IF_ERROR(Bias("image_end", d, &w->image_end));
    FS_RETURN_IF_ERROR(Bias("image_newline", d, &w->image_newline));
    if (!c.is_v41()) FS_RETURN_IF_ERROR(Bias("image_pad", d, &w->image_pad));
    return Status::Ok();
  }

  Status Layer(const LayerSpec& s, LayerWeights* w) {
    int64_t d = c.hidden_size;
    if (const int e = EngramIndex(c, s.index); e >= 0) FS_RETURN_IF_ERROR(Engram(s.prefix + "engram.", e, &w->engram));
    FS_ASSIGN_OR_RETURN(w->attn_norm, r.Floats(s.prefix + "attn_norm.weight", {d}));
    FS_ASSIGN_OR_RETURN(w->ffn_norm, r.Floats(s.prefix + "ffn_norm.weight", {d}));
    FS_RETURN_IF_ERROR(Hc(s.prefix + "hc_attn_", c.hc_mix(), 3, &w->hc_attn));
    FS_RETURN_IF_ERROR(Hc(s.prefix + "hc_ffn_", c.hc_mix(), 3, &w->hc_ffn));
    FS_RETURN_IF_ERROR(Attention(s, &w->attn));
    FS_RETURN_IF_ERROR(Moe(s, &w->moe));
    if (s.is_mtp && s.dspark_stage < 0) {
      MtpExtraWeights& m = w->mtp;
      FS_ASSIGN_OR_RETURN(m.e_proj, r.Linear(s.prefix + "e_proj", d, d, LinearKind::kDense));
      FS_ASSIGN_OR_RETURN(m.h_proj, r.Linear(s.prefix + "h_proj", d, d, LinearKind::kDense));
      FS_ASSIGN_OR_RETURN(m.enorm, r.Floats(s.prefix + "enorm.weight", {d}));
      FS_ASSIGN_OR_RETURN(m.hnorm, r.Floats(s.prefix + "hnorm.weight", {d}));
      FS_ASSIGN_OR_RETURN(m.norm, r.Floats(s.prefix + "norm.weight", {d}));
      FS_RETURN_IF_ERROR(Hc(s.prefix + "hc_head_", c.hc_mult, 1, &m.hc_head));
    }
    return Status::Ok();
  }

  // Stage 0 projects the context; the last stage holds the heads.
  Status Dspark(const LayerPlan& plan, DsparkWeights* w) {
    const int64_t d = c.hidden_size, v = c.vocab_size, rank = c.dspark.markov_rank;
    const std::string first = plan[static_cast<size_t>(c.num_layers)].prefix, last = plan.back().prefix;
    FS_ASSIGN_OR_RETURN(w->main_proj, r.Linear(first + "main_proj", d, c.dspark.stages() * d, LinearKind::kDense));
    FS_ASSIGN_OR_RETURN(w->main_norm, r.Floats(first + "main_norm.weight", {d}));
    FS_ASSIGN_OR_RETURN(w->norm, r.Floats(last + "norm.weight", {d}));
    FS_RETURN_IF_ERROR(Hc(last + "hc_head_", c.hc_mult, 1, &w->hc_head));
    FS_ASSIGN_OR_RETURN(w->markov_w1, r.Linear(last + "markov_head.markov_w1", v, rank, LinearKind::kFloatOnly));
    FS_ASSIGN_OR_RETURN(w->markov_w2, r.Linear(last + "markov_head.markov_w2", v, rank, LinearKind::kFloatOnly));
    FS_ASSIGN_OR_RETURN(w->confidence, r.Floats(last + "confidence_head.proj.weight", {1, d + rank}));
    return Status::Ok();
  }
};

}  // namespace

Result<ModelWeights> LoadModelWeights(const Checkpoint& ckpt, const ModelConfig& config, const LayerPlan& plan) {
  WeightReader reader(ckpt, config.weight_block);
  Loader loader{config, reader};
  ModelWeights w;
  int64_t v = config.vocab_size, d = config.hidden_size;
  FS_ASSIGN_OR_RETURN(w.embed, reader.Linear("embed", v, d, LinearKind::kFloatOnly));
  FS_ASSIGN_OR_RETURN(w.head, reader.Linear("head", v, d, LinearKind::kFloatOnly));
  w.head.SetExponentRange();  // BF16: lets the head's products use BF16 dot products (kernels/gemm)
  FS_ASSIGN_OR_RETURN(w.norm, reader.Floats("norm.weight", {d}));
  if (!config.is_v41()) FS_RETURN_IF_ERROR(loader.Hc("hc_head_", config.hc_mult, 1, &w.hc_head));
  w.layers.resize(plan.size());
  for (const LayerSpec& spec : plan) {
    Status s = loader.Layer(spec, &w.layers[static_cast<size_t>(spec.index)]);
    if (!s.ok()) return s.error().WithContext("layer " + spec.prefix.substr(0, spec.prefix.size() - 1));
  }
  if (config.dspark.present()) {
    Status s = loader.Dspark(plan, &w.dspark);
    if (!s.ok()) return s.error().WithContext("DSpark drafter");
  }
  if (config.vision.present()) {
    Status s = loader.Vision(&w.vision);
    if (!s.ok()) return s.error().WithContext("vision tower");
  }
  w.num_tensors = reader.used().size();
  for (const auto& name : reader.used()) w.total_bytes += ckpt.Find(name)->num_bytes;
  size_t unused = ckpt.num_tensors() - reader.used().size();
  if (unused > 0) FS_LOG(kInfo, "checkpoint has {} tensors the engine does not use", unused);
  return w;
}

}  // namespace flashserve::model
