// Model hyper-parameters read from a checkpoint's config.json (DeepseekV4ForCausalLM, or the
// composite DeepseekV41ForCausalLM config with its text_config), with both the official key
// names and the normalised Hugging Face ones, validated once.
// Immutable after parsing; callers: weights loading, the engine, make-model, app.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace flashserve::model {

// The id every picture span position carries on V4 checkpoints with a tower (Vision-Exp, whose
// config names none): V4.1's image_token_id, unused by the V4 tokenizer.
inline constexpr int64_t kVisionExpImageToken = 129264;

enum class ModelFamily { kV4, kV41 };       // DeepSeek-V4 / V4-Pro, or DeepSeek-V4.1
enum class WeightFormat { kBf16, kFp8 };    // dense linears
enum class ExpertFormat { kBf16, kFp8, kFp4 };  // routed experts

struct YarnParams {
  double factor = 1.0;
  int64_t original_max_position = 0;  // 0 = no YaRN
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// V4.1 Engram n-gram tables (v4-architecture.md section 5.4).
struct EngramConfig {
  std::vector<int> layer_ids;
  std::vector<int64_t> num_embeddings;  // rows per layer table
  int max_ngram_size = 0;
  int64_t vocab_size = 0;               // primes are drawn above this
  int num_heads = 0;
  int head_dim = 0;
  int64_t pad_id = 0;
  int64_t compressed_vocab_size = 0;
};

// The vision tower and its preprocessing (V4.1: the composite `vision_config`; V4 Vision-Exp: the
// flat `vision_*` keys). num_layers == 0: a text-only checkpoint.
struct VisionTowerConfig {
  int num_layers = 0;
  int dim = 1024;
  int num_heads = 16;
  int inter_dim = 2816;      // SwiGLU width
  int patch_size = 14;
  double rope_theta = 10000.0;
  int downsample_ratio = 3;  // aligner merges ratio x ratio patches
  int max_image_tokens = 384;
  int64_t min_pixels = 147456;
  int max_wh_ratio = 8;      // 0: no limit
  double norm_eps = 1e-6;
  bool present() const { return num_layers > 0; }
  int head_dim() const { return dim / num_heads; }
};

// The DSpark drafter of a V4 checkpoint (v4-architecture.md 4.7, api-and-decoding.md 3.3):
// `stages` draft blocks stored as `mtp.0..stages-1` after the trunk, fed the mean residual streams
// entering `target_layers`; block_size == 0: the checkpoint has none.
struct DsparkConfig {
  int block_size = 0;               // drafts per block: [anchor, noise x (block_size - 1)]
  int64_t noise_token_id = 128799;  // the filler token of a block's later positions
  std::vector<int> target_layers;   // one per stage (the released configs pair them)
  int markov_rank = 256;            // the Markov head's rank r
  bool present() const { return block_size > 0; }
  int stages() const { return present() ? static_cast<int>(target_layers.size()) : 0; }
};

struct ModelConfig {
  std::string architecture;  // "DeepseekV4ForCausalLM" or "DeepseekV41ForCausalLM"
  ModelFamily family = ModelFamily::kV4;
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
  std::vector<int> compress_ratios;  // trunk layers then MTP layers (V4: 0 / 4 / 128; V4.1: 0 / 2 / 1)
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

  // V4.1 only (v4-architecture.md section 5): cross-layer KV / index sharing, two-level top-k.
  std::vector<int> kv_source_layers;
  std::vector<int> index_source_layers;
  int candidate_source_layer = -1;  // -1: no candidate blocks
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;
  double gate_temp = 1.0;           // router logits are divided by it
  int64_t image_token_id = -1;  // V4 with a tower (Vision-Exp) and no id given: kVisionExpImageToken
  int num_draft_layers = 0;         // V4.1: DSpark stages in the checkpoint (not run by the engine yet)
  DsparkConfig dspark;              // V4: a DSpark drafter the engine runs (its stages follow the trunk)
  EngramConfig engram;
  VisionTowerConfig vision;

  bool is_v41() const { return family == ModelFamily::kV41; }

  int hc_dim() const { return hc_mult * static_cast<int>(hidden_size); }
  int hc_mix() const { return (2 + hc_mult) * hc_mult; }
  int nope_dim() const { return head_dim - rope_head_dim; }
  // Layers after the trunk that a drafting sequence keeps state for: the MTP block or the
  // DSpark stages (a checkpoint has one kind or neither).
  int num_drafter_layers() const { return num_mtp_layers + dspark.stages(); }
  int total_layers() const { return num_layers + num_drafter_layers(); }
};

// Parses config.json text; every unsupported or inconsistent value is an error naming the key.
base::Result<ModelConfig> ParseModelConfig(const std::string& json_text);
base::Result<ModelConfig> LoadModelConfig(const std::string& checkpoint_dir);
// Checks internal consistency (divisibility, ranges); called by ParseModelConfig.
base::Status ValidateModelConfig(const ModelConfig& config);
base::Status ValidateV41Config(const ModelConfig& config);  // the V4.1 layer roles
// Serialises with the official key names (what make-model writes).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace flashserve::model
