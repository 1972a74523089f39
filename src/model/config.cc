// config.json parsing and validation (model/config.h).
#include "model/config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "model/config_json.h"

namespace flashserve::model {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;
using nlohmann::json;

namespace {

using namespace config_json;

Status ParseArchitecture(const json& j, ModelConfig* c) {
  auto arch = j.find("architectures");
  std::string model_type = j.value("model_type", "");
  if (arch != j.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string()) {
    c->architecture = (*arch)[0].get<std::string>();
  } else if (model_type == "deepseek_v4") {
    c->architecture = "DeepseekV4ForCausalLM";
  }
  if (c->architecture.empty() && (model_type == "deepseek_v41" || model_type == "deepseek_v41_text"))
    c->architecture = "DeepseekV41ForCausalLM";
  if (c->architecture == "DeepseekV41ForCausalLM") {
    c->family = ModelFamily::kV41;
  } else if (c->architecture != "DeepseekV4ForCausalLM") {
    return Unsupported("architectures",
                       "must be DeepseekV4ForCausalLM or DeepseekV41ForCausalLM, got '" + c->architecture + "'");
  }
  return Status::Ok();
}

Status ParseLayerSchedule(const json& j, ModelConfig* c) {
  std::vector<int> ratios;
  if (auto it = j.find("compress_ratios"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return BadKey("compress_ratios", "must be an array");
    for (const auto& r : *it) {
      if (!r.is_number_integer()) return BadKey("compress_ratios", "entries must be integers");
      ratios.push_back(r.get<int>());
    }
  } else if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
    int csa = 4, hca = 128;
    if (auto cr = j.find("compress_rates"); cr != j.end() && cr->is_object()) {
      csa = cr->value("compressed_sparse_attention", 4);
      hca = cr->value("heavily_compressed_attention", 128);
    }
    if (!lt->is_array()) return BadKey("layer_types", "must be an array");
    for (const auto& t : *lt) {
      std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "sliding_attention") ratios.push_back(0);
      else if (s == "compressed_sparse_attention") ratios.push_back(csa);
      else if (s == "heavily_compressed_attention") ratios.push_back(hca);
      else return BadKey("layer_types", "has unknown entry '" + s + "'");
    }
  } else {
    return BadKey("compress_ratios", "is missing (and no layer_types given)");
  }
  if (static_cast<int>(ratios.size()) < c->num_layers)
    return BadKey("compress_ratios", "has " + std::to_string(ratios.size()) + " entries for " +
                                         std::to_string(c->num_layers) + " layers");
  for (size_t i = c->num_layers; i < ratios.size(); ++i)
    if (ratios[i] != 0) return BadKey("compress_ratios", "entries past num_hidden_layers (MTP) must be 0");
  c->compress_ratios.assign(ratios.begin(), ratios.begin() + c->num_layers);
  c->compress_ratios.resize(c->num_layers + c->num_mtp_layers, 0);  // DSpark stages: ParseDsparkConfig

  if (auto it = j.find("num_hash_layers"); it != j.end() && !it->is_null()) {
    FS_RETURN_IF_ERROR(GetIntAs(j, "num_hash_layers", true, &c->num_hash_layers));
  } else if (auto ml = j.find("mlp_layer_types"); ml != j.end() && ml->is_array()) {
    int n = 0;
    bool seen_moe = false;
    for (const auto& t : *ml) {
      std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s == "hash_moe") {
        if (seen_moe) return Unsupported("mlp_layer_types", "hash_moe layers must come first");
        ++n;
      } else if (s == "moe") {
        seen_moe = true;
      } else {
        return BadKey("mlp_layer_types", "has unknown entry '" + s + "'");
      }
    }
    c->num_hash_layers = n;
  }
  return Status::Ok();
}

Status ParseYarn(const json& y, const std::string& key, ModelConfig* c) {
  std::string type = y.value("type", y.value("rope_type", "default"));
  if (type == "default" || type == "none") return Status::Ok();
  if (type != "yarn") return Unsupported(key, "rope type '" + type + "' (only yarn)");
  FS_RETURN_IF_ERROR(GetDouble(y, "factor", &c->yarn.factor));
  FS_RETURN_IF_ERROR(GetInt(y, "original_max_position_embeddings", true, &c->yarn.original_max_position));
  FS_RETURN_IF_ERROR(GetDouble(y, "beta_fast", &c->yarn.beta_fast));
  FS_RETURN_IF_ERROR(GetDouble(y, "beta_slow", &c->yarn.beta_slow));
  double attention_factor = 1.0;
  FS_RETURN_IF_ERROR(GetDouble(y, "attention_factor", &attention_factor));
  if (attention_factor != 1.0)
    return Unsupported(key, "attention_factor must be 1.0 (V4 applies no YaRN mscale)");
  if (auto m = y.find("mscale"); m != y.end() && m->is_number() && m->get<double>() != 0.0 &&
                                 m->get<double>() != 1.0)
    return Unsupported(key, "mscale must be absent or 1 (V4 applies no YaRN mscale)");
  return Status::Ok();
}

Status ParseRope(const json& j, ModelConfig* c) {
  FS_RETURN_IF_ERROR(GetDouble(j, "rope_theta", &c->rope_theta));
  FS_RETURN_IF_ERROR(GetDouble(j, "compress_rope_theta", &c->compress_rope_theta));
  int64_t rope_dim = -1;
  FS_RETURN_IF_ERROR(GetInt(j, "qk_rope_head_dim", false, &rope_dim));
  if (rope_dim < 0) {
    double factor = 64.0 / 512.0;
    FS_RETURN_IF_ERROR(GetDouble(j, "partial_rotary_factor", &factor));
    if (!(factor > 0.0 && factor <= 1.0)) return BadKey("partial_rotary_factor", "must be in (0, 1]");
    rope_dim = static_cast<int64_t>(c->head_dim * factor + 0.5);
  }
  c->rope_head_dim = static_cast<int>(rope_dim);
  if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
    return ParseYarn(*rs, "rope_scaling", c);
  }
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object()) {
    if (rp->contains("main") && rp->contains("compress")) {
      const json& main = (*rp)["main"];
      const json& comp = (*rp)["compress"];
      FS_RETURN_IF_ERROR(GetDouble(main, "rope_theta", &c->rope_theta));
      std::string main_type = main.value("rope_type", main.value("type", "default"));
      if (main_type != "default")
        return Unsupported("rope_parameters.main", "must be plain RoPE (V4 uses no YaRN on sliding layers)");
      FS_RETURN_IF_ERROR(GetDouble(comp, "rope_theta", &c->compress_rope_theta));
      return ParseYarn(comp, "rope_parameters.compress", c);
    }
    return ParseYarn(*rp, "rope_parameters", c);
  }
  return Status::Ok();
}

Status ParseQuantization(const json& j, ModelConfig* c) {
  std::string expert_dtype = j.value("expert_dtype", "");
  if (auto q = j.find("quantization_config"); q != j.end() && q->is_object()) {
    std::string method = q->value("quant_method", "");
    if (method != "fp8") return Unsupported("quantization_config.quant_method", "'" + method + "' (only fp8)");
    std::string fmt = q->value("fmt", "e4m3");
    if (fmt != "e4m3") return Unsupported("quantization_config.fmt", "'" + fmt + "' (only e4m3)");
    std::string scale_fmt = q->value("scale_fmt", "ue8m0");
    if (scale_fmt != "ue8m0") return Unsupported("quantization_config.scale_fmt", "'" + scale_fmt + "' (only ue8m0)");
    auto bs = q->find("weight_block_size");
    if (bs == q->end() || !bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() ||
        (*bs)[0] != (*bs)[1])
      return BadKey("quantization_config.weight_block_size", "must be [B, B]");
    c->weight_block = (*bs)[0].get<int>();
    c->weight_format = WeightFormat::kFp8;
    if (expert_dtype.empty()) expert_dtype = q->value("expert_dtype", "");
  }
  if (expert_dtype == "fp4") c->expert_format = ExpertFormat::kFp4;
  else if (expert_dtype.empty()) c->expert_format = c->weight_format == WeightFormat::kFp8 ? ExpertFormat::kFp8 : ExpertFormat::kBf16;
  else if (expert_dtype == "fp8") c->expert_format = ExpertFormat::kFp8;
  else return Unsupported("expert_dtype", "'" + expert_dtype + "' (fp4, fp8 or absent)");
  return Status::Ok();
}

Status ParseMoe(const json& j, ModelConfig* c) {
  FS_RETURN_IF_ERROR(GetIntAs(j, "n_routed_experts", true, &c->num_routed_experts));
  FS_RETURN_IF_ERROR(GetIntAs(j, "num_experts_per_tok", true, &c->num_experts_per_token));
  FS_RETURN_IF_ERROR(GetIntAs(j, "n_shared_experts", false, &c->num_shared_experts));
  FS_RETURN_IF_ERROR(GetIntAs(j, "moe_intermediate_size", true, &c->moe_inter_dim));
  FS_RETURN_IF_ERROR(GetDouble(j, "routed_scaling_factor", &c->routed_scaling_factor));
  FS_RETURN_IF_ERROR(GetDouble(j, "swiglu_limit", &c->swiglu_limit));
  std::string scoring = j.value("scoring_func", "sqrtsoftplus");
  if (scoring != "sqrtsoftplus") return Unsupported("scoring_func", "'" + scoring + "' (only sqrtsoftplus)");
  std::string topk = j.value("topk_method", "noaux_tc");
  if (topk != "noaux_tc") return Unsupported("topk_method", "'" + topk + "' (only noaux_tc)");
  if (!j.value("norm_topk_prob", true)) return Unsupported("norm_topk_prob", "false (V4 renormalises)");
  std::string act = j.value("hidden_act", "silu");
  if (act != "silu") return Unsupported("hidden_act", "'" + act + "' (only silu)");
  return Status::Ok();
}

// The config's fields; json::value reads of keys of the wrong type throw (ParseModelConfig
// turns that into kBadConfig).
Result<ModelConfig> ParseConfigObject(const json& root) {
  ModelConfig c;
  FS_RETURN_IF_ERROR(ParseArchitecture(root, &c));
  FS_ASSIGN_OR_RETURN(json j, c.is_v41() ? V41TextSection(root) : root);
  FS_RETURN_IF_ERROR(GetInt(j, "vocab_size", true, &c.vocab_size));
  FS_RETURN_IF_ERROR(GetInt(j, "hidden_size", true, &c.hidden_size));
  FS_RETURN_IF_ERROR(GetIntAs(j, "num_hidden_layers", true, &c.num_layers));
  FS_RETURN_IF_ERROR(GetIntAs(j, "num_nextn_predict_layers", false, &c.num_mtp_layers));
  // Bounded before anything is sized by them (ValidateModelConfig checks the rest later).
  if (c.num_layers < 1 || c.num_layers > 4096) return BadKey("num_hidden_layers", "must be 1..4096");
  if (c.num_mtp_layers < 0 || c.num_mtp_layers > 64) return BadKey("num_nextn_predict_layers", "must be 0..64");
  if (c.is_v41()) {  // V4.1's extra layers are DSpark draft stages, not an MTP block
    c.num_draft_layers = c.num_mtp_layers;
    c.num_mtp_layers = 0;
  }
  FS_RETURN_IF_ERROR(GetIntAs(j, "num_attention_heads", true, &c.num_heads));
  FS_RETURN_IF_ERROR(GetIntAs(j, "head_dim", true, &c.head_dim));
  FS_RETURN_IF_ERROR(GetIntAs(j, "q_lora_rank", true, &c.q_lora_rank));
  FS_RETURN_IF_ERROR(GetIntAs(j, "o_groups", true, &c.o_groups));
  FS_RETURN_IF_ERROR(GetIntAs(j, "o_lora_rank", true, &c.o_lora_rank));
  c.sliding_window = 128;
  FS_RETURN_IF_ERROR(GetIntAs(j, "sliding_window", false, &c.sliding_window));
  FS_RETURN_IF_ERROR(GetIntAs(j, "index_n_heads", true, &c.index_n_heads));
  FS_RETURN_IF_ERROR(GetIntAs(j, "index_head_dim", true, &c.index_head_dim));
  FS_RETURN_IF_ERROR(GetIntAs(j, "index_topk", true, &c.index_topk));
  FS_RETURN_IF_ERROR(GetIntAs(j, "hc_mult", false, &c.hc_mult));
  FS_RETURN_IF_ERROR(GetIntAs(j, "hc_sinkhorn_iters", false, &c.hc_sinkhorn_iters));
  FS_RETURN_IF_ERROR(GetDouble(j, "hc_eps", &c.hc_eps));
  if (c.is_v41()) c.norm_eps = 1e-20;  // V4.1's default
  FS_RETURN_IF_ERROR(GetDouble(j, "rms_norm_eps", &c.norm_eps));
  c.max_position = 1 << 20;
  FS_RETURN_IF_ERROR(GetInt(j, "max_position_embeddings", false, &c.max_position));
  FS_RETURN_IF_ERROR(GetInt(j, "bos_token_id", false, &c.bos_token_id));
  if (auto eos = j.find("eos_token_id"); eos != j.end() && eos->is_array()) {
    if (eos->empty() || !(*eos)[0].is_number_integer()) return BadKey("eos_token_id", "must be an integer");
    c.eos_token_id = (*eos)[0].get<int64_t>();
  } else {
    FS_RETURN_IF_ERROR(GetInt(j, "eos_token_id", false, &c.eos_token_id));
  }
  int64_t kv_heads = 1;
  FS_RETURN_IF_ERROR(GetInt(j, "num_key_value_heads", false, &kv_heads));
  if (kv_heads != 1) return Unsupported("num_key_value_heads", "must be 1 (V4 shares one K=V latent)");
  if (j.value("tie_word_embeddings", false)) return Unsupported("tie_word_embeddings", "true (V4 has a separate head)");
  FS_RETURN_IF_ERROR(ParseLayerSchedule(j, &c));
  FS_RETURN_IF_ERROR(ParseRope(j, &c));
  FS_RETURN_IF_ERROR(ParseQuantization(j, &c));
  FS_RETURN_IF_ERROR(ParseMoe(j, &c));
  if (c.is_v41()) FS_RETURN_IF_ERROR(ParseV41Fields(j, &c));
  if (!c.is_v41()) FS_RETURN_IF_ERROR(ParseDsparkConfig(j, &c));
  FS_RETURN_IF_ERROR(ParseVisionConfig(root, &c));
  FS_RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

}  // namespace

Result<ModelConfig> ParseModelConfig(const std::string& json_text) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Error(ErrorCode::kBadConfig, "config.json is not a JSON object");
  try {
    return ParseConfigObject(root);
  } catch (const json::exception& e) {  // a key of the wrong type read with a default (json::value)
    return Error(ErrorCode::kBadConfig, std::string("config.json: a key has the wrong type: ") + e.what());
  }
}

Result<ModelConfig> LoadModelConfig(const std::string& checkpoint_dir) {
  std::string path = (std::filesystem::path(checkpoint_dir) / "config.json").string();
  auto text = base::ReadFileToString(path);
  if (!text.ok()) return text.error().WithContext("reading model config");
  auto config = ParseModelConfig(*text);
  if (!config.ok()) return config.error().WithContext(path);
  return config;
}

}  // namespace flashserve::model
