// DeepSeek-V4.1 config.json specifics (model/config.h, v4-architecture.md sections 5 and 10.10):
// the composite layout (text_config + vision_config + top-level quantization_config), the
// layer-role keys under both the released config.json and the inference/config.json
// spellings, Engram fields, the role validation and the composite serialisation.
#include <algorithm>
#include <set>

#include "model/config_json.h"

namespace flashserve::model {

using base::Result;

namespace config_json {
namespace {

Status GetIntAny(const json& j, std::initializer_list<const char*> keys, int64_t* out) {
  for (const char* key : keys)
    if (j.contains(key) && !j[key].is_null()) return GetInt(j, key, true, out);
  return Status::Ok();
}

Status ParseEngram(const json& j, EngramConfig* e) {
  FS_RETURN_IF_ERROR(GetIntList(j, {"engram_layer_ids", "engram_layers"}, &e->layer_ids));
  if (auto it = j.find("engram_num_embeddings"); it != j.end() && it->is_array()) {
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return BadKey("engram_num_embeddings", "entries must be integers");
      e->num_embeddings.push_back(v.get<int64_t>());
    }
  }
  FS_RETURN_IF_ERROR(GetIntAs(j, "engram_max_ngram_size", false, &e->max_ngram_size));
  FS_RETURN_IF_ERROR(GetInt(j, "engram_vocab_size", false, &e->vocab_size));
  FS_RETURN_IF_ERROR(GetIntAs(j, "engram_n_heads", false, &e->num_heads));
  FS_RETURN_IF_ERROR(GetIntAs(j, "engram_head_dim", false, &e->head_dim));
  FS_RETURN_IF_ERROR(GetIntAny(j, {"engram_pad_token_id", "engram_pad_id"}, &e->pad_id));
  FS_RETURN_IF_ERROR(GetInt(j, "engram_compressed_vocab_size", false, &e->compressed_vocab_size));
  return Status::Ok();
}

// The release's flat inference/config.json names (v4-architecture.md 2.2 "ref/inference
// name"), copied to the Hugging Face names when those are absent.
void AddHfNames(json* j) {
  static const std::pair<const char*, const char*> kAliases[] = {
      {"dim", "hidden_size"}, {"n_layers", "num_hidden_layers"}, {"n_heads", "num_attention_heads"},
      {"rope_head_dim", "qk_rope_head_dim"}, {"window_size", "sliding_window"},
      {"n_activated_experts", "num_experts_per_tok"},
      {"moe_inter_dim", "moe_intermediate_size"}, {"score_func", "scoring_func"},
      {"route_scale", "routed_scaling_factor"}, {"n_hash_layers", "num_hash_layers"}, {"norm_eps", "rms_norm_eps"},
      {"n_mtp_layers", "num_nextn_predict_layers"}, {"max_seq_len", "max_position_embeddings"}};
  for (const auto& [from, to] : kAliases)
    if (j->contains(from) && !j->contains(to)) (*j)[to] = (*j)[from];
  if (!j->contains("rope_scaling") && j->contains("rope_factor")) {
    (*j)["rope_scaling"] = {{"type", "yarn"}, {"factor", (*j)["rope_factor"]},
                            {"original_max_position_embeddings", j->value("original_seq_len", json(65536))},
                            {"beta_fast", j->value("beta_fast", json(32))}, {"beta_slow", j->value("beta_slow", json(1))}};
  }
  if (!j->contains("quantization_config") && j->value("dtype", std::string()) == "fp8") {
    (*j)["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {32, 32}},
                                   {"scale_fmt", j->value("scale_fmt", std::string("ue8m0"))},
                                   {"expert_dtype", j->value("expert_dtype", std::string("fp8"))}};
  }
}

}  // namespace

Result<json> V41TextSection(const json& root) {
  auto text = root.find("text_config");
  if (text == root.end() || text->is_null()) {  // a flat text config, possibly inference/config.json
    json flat = root;
    AddHfNames(&flat);
    return flat;
  }
  if (!text->is_object()) return BadKey("text_config", "must be an object");
  json j = *text;
  if (!j.contains("quantization_config") && root.contains("quantization_config"))
    j["quantization_config"] = root["quantization_config"];
  for (const char* key : {"bos_token_id", "eos_token_id", "image_token_id", "tie_word_embeddings"})
    if (!j.contains(key) && root.contains(key)) j[key] = root[key];
  return j;
}

Status ParseV41Fields(const json& j, ModelConfig* c) {
  FS_RETURN_IF_ERROR(GetIntList(j, {"kv_source_layer_ids", "kv_source_layers"}, &c->kv_source_layers));
  FS_RETURN_IF_ERROR(GetIntList(j, {"index_source_layer_ids", "index_source_layers"}, &c->index_source_layers));
  // Absent keys take the release's defaults: the last KV source publishes 2048 candidate
  // blocks of 8 (an explicit -1 turns the two-level top-k off).
  int64_t candidate = c->kv_source_layers.empty() ? -1 : c->kv_source_layers.back();
  c->candidate_topk_blocks = 2048;
  c->candidate_block_size = 8;
  FS_RETURN_IF_ERROR(GetIntAny(j, {"candidate_source_layer_id", "candidate_source_layer"}, &candidate));
  c->candidate_source_layer = static_cast<int>(candidate);
  FS_RETURN_IF_ERROR(GetIntAs(j, "candidate_topk_blocks", false, &c->candidate_topk_blocks));
  FS_RETURN_IF_ERROR(GetIntAs(j, "candidate_block_size", false, &c->candidate_block_size));
  FS_RETURN_IF_ERROR(GetDouble(j, "gate_temp", &c->gate_temp));
  FS_RETURN_IF_ERROR(GetInt(j, "image_token_id", false, &c->image_token_id));
  return ParseEngram(j, &c->engram);
}

std::string V41ConfigToJson(const ModelConfig& c) {
  nlohmann::ordered_json t;
  t["model_type"] = "deepseek_v41_text";
  t["vocab_size"] = c.vocab_size;
  t["hidden_size"] = c.hidden_size;
  t["moe_intermediate_size"] = c.moe_inter_dim;
  t["num_hidden_layers"] = c.num_layers;
  t["num_attention_heads"] = c.num_heads;
  t["num_key_value_heads"] = 1;
  t["head_dim"] = c.head_dim;
  t["qk_rope_head_dim"] = c.rope_head_dim;
  t["q_lora_rank"] = c.q_lora_rank;
  t["o_lora_rank"] = c.o_lora_rank;
  t["o_groups"] = c.o_groups;
  t["hidden_act"] = "silu";
  t["swiglu_limit"] = c.swiglu_limit;
  t["rms_norm_eps"] = c.norm_eps;
  t["max_position_embeddings"] = c.max_position;
  t["rope_theta"] = c.rope_theta;
  if (c.yarn.original_max_position > 0)
    t["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", c.yarn.factor}, {"beta_fast", c.yarn.beta_fast},
                         {"beta_slow", c.yarn.beta_slow},
                         {"original_max_position_embeddings", c.yarn.original_max_position}};
  t["n_routed_experts"] = c.num_routed_experts;
  t["n_shared_experts"] = c.num_shared_experts;
  t["num_experts_per_tok"] = c.num_experts_per_token;
  t["scoring_func"] = "sqrtsoftplus";
  t["topk_method"] = "noaux_tc";
  t["norm_topk_prob"] = true;
  t["routed_scaling_factor"] = c.routed_scaling_factor;
  t["gate_temp"] = c.gate_temp;
  t["sliding_window"] = c.sliding_window;
  t["compress_ratios"] = c.compress_ratios;
  t["compress_rope_theta"] = c.compress_rope_theta;
  t["kv_source_layer_ids"] = c.kv_source_layers;
  t["index_source_layer_ids"] = c.index_source_layers;
  t["index_n_heads"] = c.index_n_heads;
  t["index_head_dim"] = c.index_head_dim;
  t["index_topk"] = c.index_topk;
  t["candidate_source_layer_id"] = c.candidate_source_layer;
  t["candidate_topk_blocks"] = c.candidate_topk_blocks;
  t["candidate_block_size"] = c.candidate_block_size;
  t["hc_mult"] = c.hc_mult;
  t["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  t["hc_eps"] = c.hc_eps;
  t["engram_layer_ids"] = c.engram.layer_ids;
  if (!c.engram.layer_ids.empty()) {
    t["engram_num_embeddings"] = c.engram.num_embeddings;
    t["engram_max_ngram_size"] = c.engram.max_ngram_size;
    t["engram_vocab_size"] = c.engram.vocab_size;
    t["engram_n_heads"] = c.engram.num_heads;
    t["engram_head_dim"] = c.engram.head_dim;
    t["engram_pad_token_id"] = c.engram.pad_id;
    t["engram_compressed_vocab_size"] = c.engram.compressed_vocab_size;
  }
  t["num_nextn_predict_layers"] = c.num_draft_layers;

  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV41ForCausalLM"};
  j["model_type"] = "deepseek_v41";
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_id;
  if (c.image_token_id >= 0) j["image_token_id"] = c.image_token_id;
  j["tie_word_embeddings"] = false;
  if (c.weight_format == WeightFormat::kFp8) {
    j["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"},
                                {"weight_block_size", {c.weight_block, c.weight_block}},
                                {"scale_fmt", "ue8m0"},
                                {"expert_dtype", c.expert_format == ExpertFormat::kFp4 ? "fp4" : "fp8"}};
  }
  j["text_config"] = t;
  AddVisionConfig(c, &j);
  return j.dump(2) + "\n";
}

}  // namespace config_json

namespace {

base::Error Role(const std::string& what) {
  return base::Error(base::ErrorCode::kUnsupportedConfig, "config.json (V4.1 layer roles): " + what);
}

// Strictly increasing layer indices of trunk layers with a compressed branch.
base::Status CheckRoleList(const ModelConfig& c, const std::vector<int>& layers, const std::string& key) {
  for (size_t i = 0; i < layers.size(); ++i) {
    const int l = layers[i];
    if (l < 0 || l >= c.num_layers) return Role(key + " lists layer " + std::to_string(l) + ", outside the model");
    if (i > 0 && l <= layers[i - 1]) return Role(key + " must be strictly increasing");
    if (c.compress_ratios[static_cast<size_t>(l)] == 0)
      return Role(key + " lists layer " + std::to_string(l) + ", which has no compressed branch (ratio 0)");
  }
  return base::Status::Ok();
}

// Latest entry of `sorted` that is <= layer, or -1.
int LatestAtOrBefore(const std::vector<int>& sorted, int layer) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), layer);
  return it == sorted.begin() ? -1 : *(it - 1);
}

base::Status ValidateEngram(const ModelConfig& c) {
  const EngramConfig& e = c.engram;
  if (e.layer_ids.empty()) return base::Status::Ok();
  auto bad = [](const std::string& what) {
    return base::Error(base::ErrorCode::kBadConfig, "config.json (Engram): " + what);
  };
  for (size_t i = 0; i < e.layer_ids.size(); ++i) {
    if (e.layer_ids[i] < 0 || e.layer_ids[i] >= c.num_layers) return bad("engram_layer_ids lists a layer outside the model");
    if (i > 0 && e.layer_ids[i] <= e.layer_ids[i - 1]) return bad("engram_layer_ids must be strictly increasing");
  }
  if (e.num_embeddings.size() != e.layer_ids.size())
    return bad("engram_num_embeddings needs one table size per engram layer");
  if (e.max_ngram_size < 2 || e.max_ngram_size > 8) return bad("engram_max_ngram_size must be in [2, 8]");
  if (e.num_heads <= 0 || e.head_dim <= 0 || e.head_dim % 32 != 0)
    return bad("engram_n_heads must be positive and engram_head_dim a positive multiple of 32");
  if (e.vocab_size <= 1 || e.compressed_vocab_size <= 0 || e.compressed_vocab_size > c.vocab_size)
    return bad("engram_vocab_size and engram_compressed_vocab_size must be positive (the latter <= vocab_size)");
  if (e.pad_id < 0 || e.pad_id >= c.vocab_size) return bad("engram_pad_token_id must be a token id");
  return base::Status::Ok();
}

}  // namespace

base::Status ValidateV41Config(const ModelConfig& c) {
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    const int r = c.compress_ratios[i];
    if (r != 0 && r != 1 && r != 2)
      return Role("compress_ratios[" + std::to_string(i) + "] = " + std::to_string(r) + " (V4.1 supports 0, 1, 2)");
  }
  if (c.num_hash_layers != 0) return Role("num_hash_layers must be 0 (V4.1 has no hash-routed layers)");
  FS_RETURN_IF_ERROR(CheckRoleList(c, c.kv_source_layers, "kv_source_layer_ids"));
  FS_RETURN_IF_ERROR(CheckRoleList(c, c.index_source_layers, "index_source_layer_ids"));
  const std::set<int> index_sources(c.index_source_layers.begin(), c.index_source_layers.end());
  for (int s : c.kv_source_layers)
    if (!index_sources.count(s))
      return Role("KV source layer " + std::to_string(s) + " must also be an index source (it publishes the index keys)");
  for (int l = 0; l < c.num_layers; ++l) {
    const int ratio = c.compress_ratios[static_cast<size_t>(l)];
    if (ratio == 0) continue;
    const int source = LatestAtOrBefore(c.kv_source_layers, l);
    if (source < 0) return Role("layer " + std::to_string(l) + " has a compressed branch but no KV source at or before it");
    if (c.compress_ratios[static_cast<size_t>(source)] != ratio)
      return Role("layer " + std::to_string(l) + " (ratio " + std::to_string(ratio) + ") reads KV source " +
                  std::to_string(source) + " compressed at another ratio");
  }
  if (c.candidate_source_layer >= 0) {
    const int cand = c.candidate_source_layer;
    if (!index_sources.count(cand)) return Role("candidate_source_layer_id must be an index source layer");
    if (c.candidate_topk_blocks <= 0 || c.candidate_block_size <= 0)
      return Role("candidate_topk_blocks and candidate_block_size must be positive");
    const int cand_source = LatestAtOrBefore(c.kv_source_layers, cand);
    for (int l : c.index_source_layers)
      if (l > cand && LatestAtOrBefore(c.kv_source_layers, l) != cand_source)
        return Role("index source " + std::to_string(l) +
                    " uses the candidate blocks but scores another KV source's keys than the candidate source");
  }
  if (!(c.gate_temp > 0)) return Role("gate_temp must be positive");
  if (c.head_dim % 32 != 0 || c.index_head_dim % 32 != 0)
    return Role("head_dim and index_head_dim must be multiples of 32 (FP8 / FP4 cache blocks)");
  return ValidateEngram(c);
}

}  // namespace flashserve::model
