// Preset configurations (model/presets.h).
#include "model/presets.h"

namespace flashserve::model {

namespace {
using base::Result;

ModelConfig CommonV4() {
  ModelConfig c;
  c.architecture = "DeepseekV4ForCausalLM";
  c.vocab_size = 129280;
  c.head_dim = 512;
  c.rope_head_dim = 64;
  c.sliding_window = 128;
  c.rope_theta = 10000.0;
  c.compress_rope_theta = 160000.0;
  c.yarn = YarnParams{16.0, 65536, 32.0, 1.0};
  c.index_head_dim = 128;
  c.num_shared_experts = 1;
  c.routed_scaling_factor = 1.5;
  c.swiglu_limit = 10.0;
  c.num_hash_layers = 3;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.norm_eps = 1e-6;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.weight_format = WeightFormat::kFp8;
  c.expert_format = ExpertFormat::kFp4;
  c.weight_block = 128;
  return c;
}
// V4.1 common values (v4-architecture.md sections 2.2 and 5): 32x32 FP8 tiles, eps 1e-20,
// no hash layers, no MTP block.
ModelConfig CommonV41() {
  ModelConfig c = CommonV4();
  c.architecture = "DeepseekV41ForCausalLM";
  c.family = ModelFamily::kV41;
  c.num_hash_layers = 0;
  c.norm_eps = 1e-20;
  c.weight_block = 32;
  c.gate_temp = 1.0;
  c.image_token_id = 129264;
  c.candidate_block_size = 8;
  return c;
}
}  // namespace

// A narrow two-layer tower with the released preprocessing (14 px patches, 3x3 merge, 384
// tokens, 147456 minimum pixels, 8:1), so token counts are the real model's.
VisionTowerConfig TinyVisionTower() {
  VisionTowerConfig v;
  v.num_layers = 2;
  v.dim = 64;
  v.num_heads = 4;
  v.inter_dim = 96;
  return v;
}

// Engram class counts depend on the tokenizer: make-model sets compressed_vocab_size from the
// tokenizer it ships with the checkpoint (99092 is the released V4.1 tokenizer's count).
ModelConfig TinyV41Preset() {
  ModelConfig c = CommonV41();
  c.hidden_size = 256;
  c.num_layers = 8;
  c.num_heads = 16;
  c.q_lora_rank = 128;
  c.o_groups = 4;
  c.o_lora_rank = 128;
  c.compress_ratios = {0, 0, 2, 2, 1, 1, 1, 1};
  c.kv_source_layers = {2, 4};
  c.index_source_layers = {2, 4, 6};
  c.candidate_source_layer = 4;
  c.candidate_topk_blocks = 4;
  c.index_n_heads = 4;
  c.index_topk = 16;
  c.num_routed_experts = 16;
  c.num_experts_per_token = 4;
  c.moe_inter_dim = 128;
  c.max_position = 8192;
  // Engram at layer 1: 2-, 3- and 4-grams x 2 heads of 32, six primes above 1000 (6126 rows).
  c.engram = EngramConfig{{1}, {6126}, 4, 1000, 2, 32, 2, 99092};
  c.vision = TinyVisionTower();
  return c;
}

ModelConfig MediumV41Preset() {
  ModelConfig c = CommonV41();
  c.hidden_size = 1024;
  c.num_layers = 10;
  c.num_heads = 16;
  c.q_lora_rank = 512;
  c.o_groups = 4;
  c.o_lora_rank = 256;
  c.compress_ratios = {0, 0, 2, 2, 2, 1, 1, 1, 1, 1};
  c.kv_source_layers = {2, 5};
  c.index_source_layers = {2, 5, 7, 9};
  c.candidate_source_layer = 5;
  c.candidate_topk_blocks = 64;
  c.index_n_heads = 16;
  c.index_topk = 128;
  c.num_routed_experts = 64;
  c.num_experts_per_token = 6;
  c.moe_inter_dim = 768;
  c.max_position = 65536;
  // Engram at layer 1 shaped like V4.1-Flash's (3 n-gram sizes x 8 heads), smaller rows/tables.
  c.engram = EngramConfig{{1}, {482648}, 4, 20000, 8, 64, 2, 99092};
  return c;
}

ModelConfig TinyPreset() {
  ModelConfig c = CommonV4();
  c.hidden_size = 256;
  c.num_layers = 6;
  c.num_mtp_layers = 1;
  c.num_heads = 16;
  c.q_lora_rank = 128;
  c.o_groups = 4;
  c.o_lora_rank = 128;
  c.compress_ratios = {0, 4, 128, 4, 128, 0, 0};
  c.index_n_heads = 8;
  c.index_topk = 16;
  c.num_routed_experts = 16;
  c.num_experts_per_token = 4;
  c.moe_inter_dim = 128;
  c.max_position = 8192;
  return c;
}

ModelConfig MediumPreset() {
  ModelConfig c = CommonV4();
  c.hidden_size = 1024;
  c.num_layers = 10;
  c.num_mtp_layers = 1;
  c.num_heads = 16;
  c.q_lora_rank = 512;
  c.o_groups = 4;
  c.o_lora_rank = 256;
  c.compress_ratios = {0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0};
  c.index_n_heads = 16;
  c.index_topk = 64;
  c.num_routed_experts = 64;
  c.num_experts_per_token = 6;
  c.moe_inter_dim = 768;
  c.max_position = 65536;
  return c;
}

// tiny-v41 with the released tower (32 layers of width 1024, 16 heads, SwiGLU 2816: 412M
// parameters, 0.8 GB in BF16), for `flashserve bench-vision`.
ModelConfig TowerV41Preset() {
  ModelConfig c = TinyV41Preset();
  c.vision = VisionTowerConfig{};
  c.vision.num_layers = 32;
  return c;
}

// tiny with the small tower, laid out as DeepSeek-V4-Flash-Vision-Exp (bias_vl on every layer,
// the learned pad vector, pictures in paired-row spans).
ModelConfig TinyVisionExpPreset() {
  ModelConfig c = TinyPreset();
  c.vision = TinyVisionTower();
  c.image_token_id = kVisionExpImageToken;
  return c;
}

ModelConfig WithDspark(ModelConfig c) {
  c.num_mtp_layers = 0;
  c.dspark.block_size = 5;
  c.dspark.noise_token_id = 128799;
  c.dspark.markov_rank = 256;
  c.dspark.target_layers = {c.num_layers - 3, c.num_layers - 2, c.num_layers - 1};
  c.compress_ratios.resize(static_cast<size_t>(c.num_layers));
  c.compress_ratios.resize(static_cast<size_t>(c.total_layers()), 0);
  return c;
}

Result<ModelConfig> PresetByName(const std::string& name) {
  if (name == "tiny") return TinyPreset();
  if (name == "medium") return MediumPreset();
  if (name == "tiny-dspark") return WithDspark(TinyPreset());
  if (name == "medium-dspark") return WithDspark(MediumPreset());
  if (name == "tiny-v41") return TinyV41Preset();
  if (name == "medium-v41") return MediumV41Preset();
  if (name == "tower-v41") return TowerV41Preset();
  if (name == "tiny-vision-exp") return TinyVisionExpPreset();
  return base::Error(base::ErrorCode::kInvalidArgument,
                     "unknown preset '" + name + "' (tiny, medium, tiny-dspark, medium-dspark, tiny-v41, medium-v41, tower-v41, tiny-vision-exp)");
}

std::vector<std::string> PresetNames() {
  return {"tiny", "medium", "tiny-dspark", "medium-dspark", "tiny-v41", "medium-v41", "tower-v41", "tiny-vision-exp"};
}

}  // namespace flashserve::model
