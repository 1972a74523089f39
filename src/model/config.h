// Model hyper-parameters read from a checkpoint's config.json (DeepseekV4ForCausalLM), with
// both the official key names and the normalised Hugging Face ones, validated once.
// Immutable after parsing; callers: weights loading, the engine, make-model, app.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace flashserve::model {

enum class WeightFormat { kBf16, kFp8 };    // dense linears
enum class ExpertFormat { kBf16, kFp8, kFp4 };  // routed experts

struct YarnParams {
  double factor = 1.0;
  int64_t original_max_position = 0;  // 0 = no YaRN
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct ModelConfig {
  std::string architecture;  // "DeepseekV4ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // d
  int num_layers = 0;             // trunk blocks
  int num_mtp_layers = 0;
  int num_heads = 0;              // H
  int head_dim = 0;               // D
  int rope_head_dim = 0;          // trailing RoPE channels
  int q_lora_rank = 0;
  int o_groups = 0;
  int o_lora_rank = 0;
  int sliding_window = 0;
  std::vector<int> compress_ratios;  // trunk layers then MTP layers (0 / 4 / 128)
  double rope_theta = 10000.0;
  double compress_rope_theta = 160000.0;
  YarnParams yarn;                   // applied to ratio > 0 layers only
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int num_routed_experts = 0;
  int num_experts_per_token = 0;
  int num_shared_experts = 1;
  int moe_inter_dim = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;
  int num_hash_layers = 0;
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double norm_eps = 1e-6;
  int64_t max_position = 0;
  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;
  WeightFormat weight_format = WeightFormat::kBf16;
  ExpertFormat expert_format = ExpertFormat::kBf16;
  int weight_block = 128;  // FP8 scale tile edge

  int hc_dim() const { return hc_mult * static_cast<int>(hidden_size); }
  int hc_mix() const { return (2 + hc_mult) * hc_mult; }
  int nope_dim() const { return head_dim - rope_head_dim; }
  int total_layers() const { return num_layers + num_mtp_layers; }
};

// Parses config.json text; every unsupported or inconsistent value is an error naming the key.
base::Result<ModelConfig> ParseModelConfig(const std::string& json_text);
base::Result<ModelConfig> LoadModelConfig(const std::string& checkpoint_dir);
// Checks internal consistency (divisibility, ranges); called by ParseModelConfig.
base::Status ValidateModelConfig(const ModelConfig& config);
// Serialises with the official key names (what make-model writes).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace flashserve::model
