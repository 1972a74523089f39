// DeepSeek-V4.1 configs: the composite layout of the release, both spellings of the layer-role
// keys, the derived layer roles (Reuse / Reindex / candidate blocks), and clear errors for
// schedules the roles cannot serve.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/layer_plan.h"
#include "model/presets.h"

namespace flashserve::model {
namespace {

using nlohmann::json;

// v4-architecture.md section 11's tiny V4.1 config, verbatim.
const char* kSpecTinyV41 = R"({
  "architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
  "bos_token_id": 0, "eos_token_id": 1, "image_token_id": 129264, "tie_word_embeddings": false,
  "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                          "weight_block_size": [32, 32], "scale_fmt": "ue8m0", "expert_dtype": "fp4"},
  "text_config": {
    "model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 256,
    "moe_intermediate_size": 128, "num_hidden_layers": 8, "num_attention_heads": 16,
    "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 128,
    "o_lora_rank": 128, "o_groups": 4, "hidden_act": "silu", "swiglu_limit": 10.0,
    "rms_norm_eps": 1e-20, "max_position_embeddings": 8192, "rope_theta": 10000,
    "rope_scaling": {"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                     "original_max_position_embeddings": 65536},
    "n_routed_experts": 16, "n_shared_experts": 1, "num_experts_per_tok": 4,
    "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": true,
    "routed_scaling_factor": 1.5, "sliding_window": 128,
    "compress_ratios": [0, 0, 2, 2, 1, 1, 1, 1], "compress_rope_theta": 160000,
    "kv_source_layer_ids": [2, 4], "index_source_layer_ids": [2, 4, 6],
    "index_n_heads": 4, "index_head_dim": 128, "index_topk": 16,
    "candidate_source_layer_id": 4, "candidate_topk_blocks": 4, "candidate_block_size": 8,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
    "engram_layer_ids": [1], "engram_num_embeddings": [6126], "engram_max_ngram_size": 4,
    "engram_vocab_size": 1000, "engram_n_heads": 2, "engram_head_dim": 32,
    "engram_pad_token_id": 2, "engram_compressed_vocab_size": 99092,
    "num_nextn_predict_layers": 0
  }
})";

json SpecWithoutEngram() {
  json j = json::parse(kSpecTinyV41);
  j["text_config"]["engram_layer_ids"] = json::array();
  return j;
}

void ExpectRejected(const json& j, const std::string& needle) {
  auto c = ParseModelConfig(j.dump());
  ASSERT_FALSE(c.ok()) << "accepted: " << needle;
  EXPECT_EQ(c.error().code(), base::ErrorCode::kUnsupportedConfig) << c.error().ToString();
  EXPECT_NE(c.error().message().find(needle), std::string::npos) << c.error().ToString();
}

TEST(ConfigV41Test, CompositeReleaseLayoutParses) {
  auto c = ParseModelConfig(kSpecTinyV41);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_TRUE(c->is_v41());
  EXPECT_EQ(c->architecture, "DeepseekV41ForCausalLM");
  EXPECT_EQ(c->weight_block, 32);  // from the top-level quantization_config
  EXPECT_EQ(c->weight_format, WeightFormat::kFp8);
  EXPECT_EQ(c->expert_format, ExpertFormat::kFp4);
  EXPECT_EQ(c->norm_eps, 1e-20);
  EXPECT_EQ(c->image_token_id, 129264);
  EXPECT_EQ(c->kv_source_layers, (std::vector<int>{2, 4}));
  EXPECT_EQ(c->index_source_layers, (std::vector<int>{2, 4, 6}));
  EXPECT_EQ(c->candidate_source_layer, 4);
  EXPECT_EQ(c->num_hash_layers, 0);
  EXPECT_EQ(c->num_mtp_layers, 0);
  EXPECT_EQ(c->engram.pad_id, 2);
  EXPECT_EQ(c->engram.layer_ids, (std::vector<int>{1}));
  EXPECT_EQ(c->engram.num_embeddings, (std::vector<int64_t>{6126}));
  EXPECT_EQ(c->engram.max_ngram_size, 4);
  EXPECT_EQ(c->engram.num_heads, 2);
  EXPECT_EQ(c->engram.head_dim, 32);
  EXPECT_EQ(c->engram.vocab_size, 1000);
  EXPECT_EQ(c->engram.compressed_vocab_size, 99092);
}

TEST(ConfigV41Test, LayerRolesFollowTheSources) {
  LayerPlan plan = BuildLayerPlan(ParseModelConfig(SpecWithoutEngram().dump()).value());
  ASSERT_EQ(plan.size(), 8u);
  EXPECT_EQ(plan[0].attention, AttentionKind::kSliding);
  EXPECT_EQ(plan[1].kv_source, -1);
  // Layer 2: KV source and index source of ratio 2; layer 3 reuses both.
  EXPECT_TRUE(plan[2].owns_compressor && plan[2].owns_index_keys && plan[2].runs_indexer);
  EXPECT_EQ(plan[3].attention, AttentionKind::kCsa2);
  EXPECT_EQ(plan[3].kv_source, 2);
  EXPECT_EQ(plan[3].index_source, 2);
  EXPECT_FALSE(plan[3].owns_compressor || plan[3].runs_indexer);
  // Layer 4: ratio-1 source and candidate source; 5 reuses; 6 reindexes inside the candidates.
  EXPECT_TRUE(plan[4].candidate_source);
  EXPECT_EQ(plan[5].index_source, 4);
  EXPECT_TRUE(plan[6].runs_indexer && plan[6].uses_candidates && !plan[6].owns_index_keys);
  EXPECT_EQ(plan[6].kv_source, 4);
  EXPECT_EQ(plan[7].index_source, 6);
  EXPECT_EQ(plan[7].rope, RopeTable::kCompress);
  EXPECT_EQ(plan[1].rope, RopeTable::kMain);
}

TEST(ConfigV41Test, InferenceConfigSpellingsAndFlatLayoutGiveTheSameConfig) {
  json j = SpecWithoutEngram();
  json& t = j["text_config"];
  t["kv_source_layers"] = t["kv_source_layer_ids"];
  t["index_source_layers"] = t["index_source_layer_ids"];
  t["candidate_source_layer"] = t["candidate_source_layer_id"];
  t["engram_pad_id"] = t["engram_pad_token_id"];
  for (const char* k : {"kv_source_layer_ids", "index_source_layer_ids", "candidate_source_layer_id", "engram_pad_token_id"})
    t.erase(k);
  auto a = ParseModelConfig(j.dump());
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto b = ParseModelConfig(SpecWithoutEngram().dump()).value();
  EXPECT_EQ(a->kv_source_layers, b.kv_source_layers);
  EXPECT_EQ(a->index_source_layers, b.index_source_layers);
  EXPECT_EQ(a->candidate_source_layer, b.candidate_source_layer);
  EXPECT_EQ(a->engram.pad_id, b.engram.pad_id);
  // A flat text config (no text_config wrapper) with its own quantization_config.
  json flat = SpecWithoutEngram()["text_config"];
  flat["architectures"] = {"DeepseekV41ForCausalLM"};
  flat["quantization_config"] = SpecWithoutEngram()["quantization_config"];
  auto f = ParseModelConfig(flat.dump());
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  EXPECT_EQ(f->kv_source_layers, b.kv_source_layers);
  EXPECT_EQ(f->weight_block, 32);
}

// The flat layout with the release's inference/config.json names (dim, n_layers, norm_eps,
// rope_factor, dtype, ...) gives the same config as the Hugging Face names.
TEST(ConfigV41Test, InferenceConfigNamesInAFlatConfig) {
  json t = json::parse(kSpecTinyV41)["text_config"];
  json flat = {{"architectures", {"DeepseekV41ForCausalLM"}}, {"dim", t["hidden_size"]}, {"n_layers", t["num_hidden_layers"]},
               {"n_heads", t["num_attention_heads"]}, {"head_dim", 512}, {"rope_head_dim", 64},
               {"q_lora_rank", 128}, {"o_groups", 4}, {"o_lora_rank", 128}, {"window_size", 128},
               {"vocab_size", 129280}, {"n_routed_experts", 16}, {"n_activated_experts", 4}, {"n_shared_experts", 1},
               {"moe_inter_dim", 128}, {"score_func", "sqrtsoftplus"}, {"route_scale", 1.5}, {"swiglu_limit", 10.0},
               {"norm_eps", 1e-20}, {"max_seq_len", 8192}, {"rope_theta", 10000}, {"compress_rope_theta", 160000},
               {"rope_factor", 16}, {"original_seq_len", 65536}, {"beta_fast", 32}, {"beta_slow", 1},
               {"compress_ratios", t["compress_ratios"]}, {"kv_source_layers", {2, 4}}, {"index_source_layers", {2, 4, 6}},
               {"candidate_source_layer", 4}, {"candidate_topk_blocks", 4}, {"candidate_block_size", 8},
               {"index_n_heads", 4}, {"index_head_dim", 128}, {"index_topk", 16}, {"hc_mult", 4},
               {"dtype", "fp8"}, {"scale_fmt", "ue8m0"}, {"expert_dtype", "fp4"}};
  auto a = ParseModelConfig(flat.dump());
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto b = ParseModelConfig(SpecWithoutEngram().dump()).value();
  EXPECT_EQ(a->hidden_size, b.hidden_size);
  EXPECT_EQ(a->num_layers, b.num_layers);
  EXPECT_EQ(a->num_experts_per_token, b.num_experts_per_token);
  EXPECT_EQ(a->moe_inter_dim, b.moe_inter_dim);
  EXPECT_EQ(a->norm_eps, b.norm_eps);
  EXPECT_EQ(a->yarn.original_max_position, b.yarn.original_max_position);
  EXPECT_EQ(a->yarn.factor, b.yarn.factor);
  EXPECT_EQ(a->weight_format, WeightFormat::kFp8);
  EXPECT_EQ(a->weight_block, 32);
  EXPECT_EQ(a->expert_format, ExpertFormat::kFp4);
  EXPECT_EQ(a->routed_scaling_factor, 1.5);
  EXPECT_EQ(a->sliding_window, 128);
  EXPECT_EQ(a->kv_source_layers, b.kv_source_layers);
  EXPECT_EQ(a->candidate_source_layer, b.candidate_source_layer);
}

TEST(ConfigV41Test, AbsentKeysTakeTheReleaseDefaults) {
  json j = SpecWithoutEngram();
  for (const char* k : {"candidate_source_layer_id", "candidate_topk_blocks", "candidate_block_size", "rms_norm_eps"})
    j["text_config"].erase(k);
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->candidate_source_layer, 4);  // the last KV source
  EXPECT_EQ(c->candidate_topk_blocks, 2048);
  EXPECT_EQ(c->candidate_block_size, 8);
  EXPECT_EQ(c->norm_eps, 1e-20);
  j["text_config"]["candidate_source_layer_id"] = -1;
  EXPECT_EQ(ParseModelConfig(j.dump())->candidate_source_layer, -1);
}

TEST(ConfigV41Test, PresetRoundTripsThroughTheCompositeLayout) {
  for (const ModelConfig& preset : {TinyV41Preset(), MediumV41Preset()}) {
    json j = json::parse(ModelConfigToJson(preset));
    EXPECT_TRUE(j.contains("text_config"));
    EXPECT_TRUE(j.contains("quantization_config"));
    auto c = ParseModelConfig(j.dump());
    ASSERT_TRUE(c.ok()) << c.error().ToString();
    EXPECT_EQ(c->compress_ratios, preset.compress_ratios);
    EXPECT_EQ(c->kv_source_layers, preset.kv_source_layers);
    EXPECT_EQ(c->candidate_topk_blocks, preset.candidate_topk_blocks);
    EXPECT_EQ(c->hidden_size, preset.hidden_size);
  }
}

TEST(ConfigV41Test, UnservableSchedulesAreClearErrors) {
  auto with = [](auto edit) {
    json j = SpecWithoutEngram();
    edit(j["text_config"]);
    return j;
  };
  auto engram = [](auto edit) {
    json j = json::parse(kSpecTinyV41);
    edit(j["text_config"]);
    return j;
  };
  for (const json& j : {engram([](json& t) { t["engram_num_embeddings"] = {6126, 6126}; }),
                        engram([](json& t) { t["engram_head_dim"] = 30; }),
                        engram([](json& t) { t["engram_layer_ids"] = {9}; }),
                        engram([](json& t) { t["engram_max_ngram_size"] = 1; })}) {
    auto c = ParseModelConfig(j.dump());
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.error().message().find("Engram"), std::string::npos) << c.error().ToString();
  }
  ExpectRejected(with([](json& t) { t["compress_ratios"] = {0, 0, 4, 4, 1, 1, 1, 1}; }), "compress_ratios[2]");
  ExpectRejected(with([](json& t) { t["kv_source_layer_ids"] = {2, 5}; t["index_source_layer_ids"] = {2, 4, 5, 6}; }),
                 "compressed at another ratio");
  ExpectRejected(with([](json& t) { t["kv_source_layer_ids"] = {3, 4}; t["index_source_layer_ids"] = {3, 4, 6}; }),
                 "no KV source");
  ExpectRejected(with([](json& t) { t["index_source_layer_ids"] = {4, 6}; }), "must also be an index source");
  ExpectRejected(with([](json& t) { t["kv_source_layer_ids"] = {0, 4}; }), "ratio 0");
  ExpectRejected(with([](json& t) { t["candidate_source_layer_id"] = 5; }), "candidate_source_layer_id");
  ExpectRejected(with([](json& t) { t["kv_source_layer_ids"] = {2, 4, 6}; t["index_source_layer_ids"] = {2, 4, 6}; }),
                 "candidate");
  ExpectRejected(with([](json& t) { t["num_hash_layers"] = 2; }), "num_hash_layers");
}

}  // namespace
}  // namespace flashserve::model
