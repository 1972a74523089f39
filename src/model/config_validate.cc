// Consistency checks on a parsed ModelConfig and its serialisation with the official key
// names (model/config.h).
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/config_json.h"

namespace flashserve::model {

using base::Error;
using base::ErrorCode;
using base::Status;

namespace {
Error Invalid(const std::string& what) { return Error(ErrorCode::kBadConfig, "config.json: " + what); }
bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
}  // namespace

Status ValidateModelConfig(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.vocab_size > (1 << 24)) return Invalid("vocab_size out of range");
  if (c.hidden_size <= 0 || c.hidden_size % 32 != 0) return Invalid("hidden_size must be a positive multiple of 32");
  if (c.num_layers <= 0 || c.num_layers > 512) return Invalid("num_hidden_layers out of range");
  if (c.num_mtp_layers < 0 || c.num_mtp_layers > 1)
    return Error(ErrorCode::kUnsupportedConfig, "config.json: num_nextn_predict_layers must be 0 or 1");
  if (c.dspark.present() && (c.is_v41() || c.num_mtp_layers != 0))
    return Invalid("a DSpark drafter takes the MTP block's place (V4 checkpoints)");
  if (static_cast<int>(c.compress_ratios.size()) < c.total_layers()) return Invalid("compress_ratios must cover every layer");
  if (c.num_heads <= 0 || c.head_dim <= 0) return Invalid("num_attention_heads and head_dim must be positive");
  if (c.rope_head_dim <= 0 || c.rope_head_dim % 2 != 0 || c.rope_head_dim >= c.head_dim)
    return Invalid("qk_rope_head_dim must be even and smaller than head_dim");
  if (!c.is_v41() && c.nope_dim() % 64 != 0)
    return Invalid("head_dim - qk_rope_head_dim must be a multiple of 64 (FP8 KV blocks)");
  if (c.q_lora_rank <= 0 || c.q_lora_rank % 32 != 0) return Invalid("q_lora_rank must be a positive multiple of 32");
  if (c.o_groups <= 0 || c.num_heads % c.o_groups != 0) return Invalid("num_attention_heads must be divisible by o_groups");
  if (c.o_lora_rank <= 0 || c.o_lora_rank % 32 != 0) return Invalid("o_lora_rank must be a positive multiple of 32");
  if (c.sliding_window <= 0) return Invalid("sliding_window must be positive");
  for (size_t i = 0; i < c.compress_ratios.size() && !c.is_v41(); ++i) {
    int r = c.compress_ratios[i];
    if (r != 0 && r != 4 && r != 128)
      return Error(ErrorCode::kUnsupportedConfig, "config.json: compress_ratios[" + std::to_string(i) + "] = " +
                                                      std::to_string(r) + " (V4 supports 0, 4, 128)");
  }
  bool has_csa = false;
  for (int r : c.compress_ratios) has_csa |= c.is_v41() ? r > 0 : r == 4;
  if (has_csa) {
    if (c.index_n_heads <= 0 || c.index_topk <= 0) return Invalid("index_n_heads and index_topk must be positive");
    if (!IsPowerOfTwo(c.index_head_dim) || c.index_head_dim < 32 || c.index_head_dim <= c.rope_head_dim)
      return Invalid("index_head_dim must be a power of two >= 32 and larger than qk_rope_head_dim");
  }
  if (c.num_routed_experts <= 0 || c.num_experts_per_token <= 0 || c.num_experts_per_token > c.num_routed_experts)
    return Invalid("need 0 < num_experts_per_tok <= n_routed_experts");
  if (c.num_shared_experts != 1)
    return Error(ErrorCode::kUnsupportedConfig, "config.json: n_shared_experts must be 1");
  if (c.moe_inter_dim <= 0 || c.moe_inter_dim % 32 != 0) return Invalid("moe_intermediate_size must be a positive multiple of 32");
  if (c.num_hash_layers < 0 || c.num_hash_layers > c.num_layers) return Invalid("num_hash_layers out of range");
  if (c.hc_mult < 1 || c.hc_mult > 16) return Invalid("hc_mult out of range");
  if (c.hc_sinkhorn_iters < 1) return Invalid("hc_sinkhorn_iters must be >= 1");
  if (!(c.norm_eps > 0) || !(c.hc_eps >= 0)) return Invalid("rms_norm_eps must be positive");
  if (c.weight_format == WeightFormat::kFp8 && (c.weight_block <= 0 || c.weight_block % 32 != 0))
    return Invalid("weight_block_size must be a positive multiple of 32");
  if (c.yarn.original_max_position > 0 && !(c.yarn.factor >= 1.0)) return Invalid("YaRN factor must be >= 1");
  if (c.max_position <= 0) return Invalid("max_position_embeddings must be positive");
  if (c.is_v41()) FS_RETURN_IF_ERROR(ValidateV41Config(c));
  if (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size || c.eos_token_id < 0 || c.eos_token_id >= c.vocab_size)
    return Invalid("bos/eos token ids must be inside the vocabulary");
  return Status::Ok();
}

std::string ModelConfigToJson(const ModelConfig& c) {
  if (c.is_v41()) return config_json::V41ConfigToJson(c);
  nlohmann::ordered_json j;
  j["architectures"] = {c.architecture.empty() ? "DeepseekV4ForCausalLM" : c.architecture};
  j["model_type"] = "deepseek_v4";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (c.expert_format == ExpertFormat::kFp4) j["expert_dtype"] = "fp4";
  j["hc_eps"] = c.hc_eps;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["index_head_dim"] = c.index_head_dim;
  j["index_n_heads"] = c.index_n_heads;
  j["index_topk"] = c.index_topk;
  j["max_position_embeddings"] = c.max_position;
  j["model_type"] = "deepseek_v4";
  j["moe_intermediate_size"] = c.moe_inter_dim;
  j["n_routed_experts"] = c.num_routed_experts;
  j["n_shared_experts"] = c.num_shared_experts;
  j["norm_topk_prob"] = true;
  j["num_attention_heads"] = c.num_heads;
  j["num_experts_per_tok"] = c.num_experts_per_token;
  j["num_hidden_layers"] = c.num_layers;
  j["num_hash_layers"] = c.num_hash_layers;
  j["num_key_value_heads"] = 1;
  j["num_nextn_predict_layers"] = c.num_drafter_layers();
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["q_lora_rank"] = c.q_lora_rank;
  j["qk_rope_head_dim"] = c.rope_head_dim;
  if (c.weight_format == WeightFormat::kFp8) {
    j["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                {"scale_fmt", "ue8m0"}, {"weight_block_size", {c.weight_block, c.weight_block}}};
  }
  j["rms_norm_eps"] = c.norm_eps;
  if (c.yarn.original_max_position > 0) {
    j["rope_scaling"] = {{"beta_fast", c.yarn.beta_fast}, {"beta_slow", c.yarn.beta_slow},
                         {"factor", c.yarn.factor},
                         {"original_max_position_embeddings", c.yarn.original_max_position},
                         {"type", "yarn"}};
  }
  j["rope_theta"] = c.rope_theta;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["scoring_func"] = "sqrtsoftplus";
  j["sliding_window"] = c.sliding_window;
  j["swiglu_limit"] = c.swiglu_limit;
  j["tie_word_embeddings"] = false;
  j["topk_method"] = "noaux_tc";
  j["torch_dtype"] = "bfloat16";
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["compress_ratios"] = c.compress_ratios;
  config_json::AddVisionConfig(c, &j);
  config_json::AddDsparkConfig(c, &j);
  return j.dump(2) + "\n";
}

}  // namespace flashserve::model
