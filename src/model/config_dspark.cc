// The DSpark drafter's config.json keys on V4 (model/config_json.h; v4-architecture.md 4.7):
// dspark_block_size, dspark_noise_token_id, dspark_target_layer_ids, dspark_markov_rank. A V4
// checkpoint with them drafts with its DSpark stages (mtp.0..S-1, S = one per target layer) and
// has no classic MTP block: its num_nextn_predict_layers is not read as one. Called by
// ParseConfigObject and ModelConfigToJson; pure functions, any thread.
#include "model/config_json.h"

namespace flashserve::model::config_json {

Status ParseDsparkConfig(const json& j, ModelConfig* c) {
  if (!j.contains("dspark_block_size") || j["dspark_block_size"].is_null()) return Status::Ok();
  DsparkConfig& d = c->dspark;
  FS_RETURN_IF_ERROR(GetIntAs(j, "dspark_block_size", true, &d.block_size));
  FS_RETURN_IF_ERROR(GetInt(j, "dspark_noise_token_id", false, &d.noise_token_id));
  FS_RETURN_IF_ERROR(GetIntList(j, {"dspark_target_layer_ids"}, &d.target_layers));
  FS_RETURN_IF_ERROR(GetIntAs(j, "dspark_markov_rank", false, &d.markov_rank));
  if (d.block_size < 1 || d.block_size > 16) return BadKey("dspark_block_size", "must be 1..16");
  if (d.block_size >= c->sliding_window) return BadKey("dspark_block_size", "must be below sliding_window");
  if (d.noise_token_id < 0 || d.noise_token_id >= c->vocab_size)
    return BadKey("dspark_noise_token_id", "must be a token id below vocab_size");
  if (d.target_layers.empty() || d.target_layers.size() > 8)
    return BadKey("dspark_target_layer_ids", "must list 1..8 layers (one per draft stage)");
  for (int layer : d.target_layers)
    if (layer < 0 || layer >= c->num_layers)
      return BadKey("dspark_target_layer_ids", "entry " + std::to_string(layer) + " is not a trunk layer");
  if (d.markov_rank < 1 || d.markov_rank > 4096) return BadKey("dspark_markov_rank", "must be 1..4096");
  c->num_mtp_layers = 0;  // the stages take the mtp.* names
  c->compress_ratios.resize(static_cast<size_t>(c->total_layers()), 0);
  return Status::Ok();
}

void AddDsparkConfig(const ModelConfig& c, nlohmann::ordered_json* root) {
  if (!c.dspark.present()) return;
  nlohmann::ordered_json& j = *root;
  j["dspark_block_size"] = c.dspark.block_size;
  j["dspark_noise_token_id"] = c.dspark.noise_token_id;
  j["dspark_target_layer_ids"] = c.dspark.target_layers;
  j["dspark_markov_rank"] = c.dspark.markov_rank;
}

}  // namespace flashserve::model::config_json
