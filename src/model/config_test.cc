#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/layer_plan.h"
#include "model/presets.h"

namespace flashserve::model {
namespace {

using nlohmann::json;

json OfficialTiny() { return json::parse(ModelConfigToJson(TinyPreset())); }

TEST(ConfigTest, PresetRoundTripsThroughOfficialKeys) {
  auto c = ParseModelConfig(OfficialTiny().dump());
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->hidden_size, 256);
  EXPECT_EQ(c->num_layers, 6);
  EXPECT_EQ(c->num_mtp_layers, 1);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 4, 128, 4, 128, 0, 0}));
  EXPECT_EQ(c->rope_head_dim, 64);
  EXPECT_EQ(c->num_hash_layers, 3);
  EXPECT_EQ(c->weight_format, WeightFormat::kFp8);
  EXPECT_EQ(c->expert_format, ExpertFormat::kFp4);
  EXPECT_EQ(c->yarn.original_max_position, 65536);
  EXPECT_DOUBLE_EQ(c->yarn.factor, 16.0);
  LayerPlan plan = BuildLayerPlan(*c);
  ASSERT_EQ(plan.size(), 7u);
  EXPECT_EQ(plan[1].attention, AttentionKind::kCsa);
  EXPECT_EQ(plan[2].attention, AttentionKind::kHca);
  EXPECT_TRUE(plan[2].hash_moe);
  EXPECT_FALSE(plan[3].hash_moe);
  EXPECT_EQ(plan[0].rope, RopeTable::kMain);
  EXPECT_EQ(plan[1].rope, RopeTable::kCompress);
  EXPECT_TRUE(plan[6].is_mtp);
  EXPECT_EQ(plan[6].prefix, "mtp.0.");
}

// Vision-Exp: the flat vision_* keys on a V4 config; its config names no placeholder id, so span
// positions carry kVisionExpImageToken unless image_token_id says otherwise; text-only V4 has none.
TEST(ConfigTest, VisionExpKeysAndItsPlaceholderId) {
  const json j = json::parse(ModelConfigToJson(TinyVisionExpPreset()));
  EXPECT_EQ(j["vision_n_layers"], 2);
  EXPECT_FALSE(j.contains("image_token_id"));
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_TRUE(c->vision.present());
  EXPECT_EQ(c->vision.dim, 64);
  EXPECT_EQ(c->vision.max_image_tokens, 384);
  EXPECT_EQ(c->image_token_id, kVisionExpImageToken);
  json other = j;
  other["image_token_id"] = 129000;
  EXPECT_EQ(ParseModelConfig(other.dump())->image_token_id, 129000);
  ModelConfig given = TinyVisionExpPreset();
  given.image_token_id = 128900;
  EXPECT_EQ(ParseModelConfig(ModelConfigToJson(given))->image_token_id, 128900);
  EXPECT_EQ(ParseModelConfig(OfficialTiny().dump())->image_token_id, -1);
}

TEST(ConfigTest, NormalisedHuggingFaceKeysGiveTheSameConfig) {
  json j = OfficialTiny();
  j.erase("compress_ratios");
  j.erase("num_hash_layers");
  j.erase("qk_rope_head_dim");
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("compress_rope_theta");
  j["layer_types"] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                      "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"};
  j["mlp_layer_types"] = {"hash_moe", "hash_moe", "hash_moe", "moe", "moe", "moe"};
  j["partial_rotary_factor"] = 0.125;
  j["rope_parameters"] = {{"main", {{"rope_type", "default"}, {"rope_theta", 10000}}},
                          {"compress",
                           {{"rope_type", "yarn"}, {"rope_theta", 160000}, {"factor", 16},
                            {"original_max_position_embeddings", 65536}, {"beta_fast", 32}, {"beta_slow", 1},
                            {"attention_factor", 1.0}}}};
  auto a = ParseModelConfig(j.dump());
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto b = ParseModelConfig(OfficialTiny().dump()).value();
  EXPECT_EQ(a->compress_ratios, b.compress_ratios);
  EXPECT_EQ(a->num_hash_layers, b.num_hash_layers);
  EXPECT_EQ(a->rope_head_dim, b.rope_head_dim);
  EXPECT_EQ(a->compress_rope_theta, b.compress_rope_theta);
  EXPECT_EQ(a->yarn.factor, b.yarn.factor);
}

void ExpectRejected(json j, base::ErrorCode code, const std::string& needle) {
  auto c = ParseModelConfig(j.dump());
  ASSERT_FALSE(c.ok()) << "accepted: " << needle;
  EXPECT_EQ(c.error().code(), code) << c.error().ToString();
  EXPECT_NE(c.error().message().find(needle), std::string::npos) << c.error().ToString();
}

TEST(ConfigTest, RejectsUnsupportedAndInconsistentValues) {
  auto j = OfficialTiny();
  ExpectRejected(json::parse("[1,2]"), base::ErrorCode::kBadConfig, "JSON object");
  { auto k = j; k.erase("hidden_size"); ExpectRejected(k, base::ErrorCode::kBadConfig, "hidden_size"); }
  { auto k = j; k["hidden_size"] = "big"; ExpectRejected(k, base::ErrorCode::kBadConfig, "hidden_size"); }
  { auto k = j; k["architectures"] = {"DeepseekV41ForCausalLM"}; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "V4.1"); }
  { auto k = j; k["architectures"] = {"LlamaForCausalLM"}; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "architectures"); }
  { auto k = j; k["compress_ratios"] = {0, 8, 128, 4, 128, 0, 0}; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "compress_ratios[1]"); }
  { auto k = j; k["compress_ratios"] = {0, 4}; ExpectRejected(k, base::ErrorCode::kBadConfig, "compress_ratios"); }
  { auto k = j; k["scoring_func"] = "softmax"; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "scoring_func"); }
  { auto k = j; k["num_key_value_heads"] = 8; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "num_key_value_heads"); }
  { auto k = j; k["rope_scaling"]["attention_factor"] = 1.277; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "attention_factor"); }
  { auto k = j; k["o_groups"] = 5; ExpectRejected(k, base::ErrorCode::kBadConfig, "o_groups"); }
  { auto k = j; k["num_experts_per_tok"] = 99; ExpectRejected(k, base::ErrorCode::kBadConfig, "num_experts_per_tok"); }
  { auto k = j; k["quantization_config"]["quant_method"] = "awq"; ExpectRejected(k, base::ErrorCode::kUnsupportedConfig, "quant_method"); }
  { auto k = j; k["eos_token_id"] = 999999; ExpectRejected(k, base::ErrorCode::kBadConfig, "eos"); }
}

// Keys read with a default (json::value) threw nlohmann's type_error out of ParseModelConfig
// when they held another type (found by fuzz/model_config_fuzz): now a kBadConfig.
TEST(ConfigTest, KeysOfTheWrongTypeAreBadConfigNotExceptions) {
  const auto j = OfficialTiny();
  for (const char* key : {"norm_topk_prob", "tie_word_embeddings", "scoring_func", "hidden_act", "model_type",
                          "expert_dtype"}) {
    auto k = j;
    k[key] = key == std::string("norm_topk_prob") || key == std::string("tie_word_embeddings") ? json(1) : json(true);
    ExpectRejected(k, base::ErrorCode::kBadConfig, "wrong type");
  }
  auto k = j;
  k["quantization_config"]["fmt"] = 3;
  ExpectRejected(k, base::ErrorCode::kBadConfig, "wrong type");
}

// Values that sized vectors or were cast before validation (found by reading the fuzz target's
// reach): layer counts out of range, integers as huge doubles, a huge rotary factor.
TEST(ConfigTest, OutOfRangeNumbersAreBadConfig) {
  const auto j = OfficialTiny();
  { auto k = j; k["num_hidden_layers"] = -1; ExpectRejected(k, base::ErrorCode::kBadConfig, "num_hidden_layers"); }
  { auto k = j; k["num_hidden_layers"] = 1 << 30; ExpectRejected(k, base::ErrorCode::kBadConfig, "num_hidden_layers"); }
  { auto k = j; k["num_nextn_predict_layers"] = 2000000000; ExpectRejected(k, base::ErrorCode::kBadConfig, "num_nextn_predict_layers"); }
  { auto k = j; k["vocab_size"] = 1e300; ExpectRejected(k, base::ErrorCode::kBadConfig, "vocab_size"); }
  {
    auto k = j;
    k.erase("qk_rope_head_dim");
    k["partial_rotary_factor"] = 1e30;
    ExpectRejected(k, base::ErrorCode::kBadConfig, "partial_rotary_factor");
  }
}

TEST(ConfigTest, AcceptsTheOfficialFlashConfigShape) {
  // Key set of deepseek-ai/DeepSeek-V4-Flash (v4-architecture.md 2.1), trailing ratios for MTP.
  auto j = OfficialTiny();
  j["num_hidden_layers"] = 4;
  j["compress_ratios"] = {0, 0, 4, 128, 0, 0, 0};
  j["eos_token_id"] = 1;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 4, 128, 0}));
  EXPECT_FALSE(c->dspark.present());
}

// V4-Flash-0731's keys (v4-architecture.md 2.1): three DSpark stages in the mtp.* names, one per
// target layer, whatever num_nextn_predict_layers says; written back and read the same.
TEST(ConfigTest, ReadsADsparkDrafterAndWritesItBack) {
  auto j = OfficialTiny();
  j["num_hidden_layers"] = 4;
  j["compress_ratios"] = {0, 0, 4, 128, 0};
  j["num_nextn_predict_layers"] = 1;
  j["dspark_block_size"] = 5;
  j["dspark_noise_token_id"] = 128799;
  j["dspark_target_layer_ids"] = {1, 2, 3};
  j["dspark_markov_rank"] = 256;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->num_mtp_layers, 0);
  EXPECT_EQ(c->dspark.stages(), 3);
  EXPECT_EQ(c->total_layers(), 7);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 4, 128, 0, 0, 0}));
  const LayerPlan plan = BuildLayerPlan(*c);
  EXPECT_EQ(plan[6].prefix, "mtp.2.");
  EXPECT_EQ(plan[6].dspark_stage, 2);
  EXPECT_FALSE(plan[4].hash_moe);
  auto again = ParseModelConfig(ModelConfigToJson(*c));
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  EXPECT_EQ(again->dspark.target_layers, c->dspark.target_layers);
  EXPECT_EQ(again->dspark.block_size, 5);
  EXPECT_EQ(again->dspark.noise_token_id, 128799);
  EXPECT_EQ(again->total_layers(), 7);
  auto preset = ParseModelConfig(ModelConfigToJson(WithDspark(MediumPreset())));
  ASSERT_TRUE(preset.ok()) << preset.error().ToString();
  EXPECT_EQ(preset->dspark.target_layers, (std::vector<int>{7, 8, 9}));
  for (auto [key, value] : std::vector<std::pair<std::string, json>>{{"dspark_block_size", 0},
                                                                     {"dspark_block_size", 17},
                                                                     {"dspark_noise_token_id", 129280},
                                                                     {"dspark_target_layer_ids", json::array({1, 4})},
                                                                     {"dspark_target_layer_ids", json::array()},
                                                                     {"dspark_markov_rank", 0}}) {
    auto bad = j;
    bad[key] = value;
    ExpectRejected(bad, base::ErrorCode::kBadConfig, key);
  }
}

}  // namespace
}  // namespace flashserve::model
