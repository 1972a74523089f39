// The vision tower's config keys (model/config_json.h): V4.1's composite `vision_config` and the
// flat `vision_*` keys of DeepSeek-V4-Flash-Vision-Exp.
#include "model/config_json.h"

namespace flashserve::model::config_json {
namespace {

struct Keys {
  const char* layers;
  const char* dim;
  const char* heads;
  const char* inter;
  const char* patch;
  const char* theta;
  const char* ratio;
  const char* max_tokens;
  const char* min_pixels;
  const char* max_wh;
};

constexpr Keys kV41Keys = {"num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "patch_size",
                           "rope_theta", "downsample_ratio", "max_image_tokens", "min_pixels", "max_wh_ratio"};
constexpr Keys kFlatKeys = {"vision_n_layers", "vision_dim", "vision_n_heads", "vision_inter_dim",
                            "vision_patch_size", "vision_rope_theta", "vision_downsample_ratio",
                            "vision_max_n_token", "vision_min_pixels", "vision_max_wh_ratio"};

Status ReadKeys(const json& j, const Keys& k, VisionTowerConfig* v) {
  FS_RETURN_IF_ERROR(GetIntAs(j, k.layers, false, &v->num_layers));
  FS_RETURN_IF_ERROR(GetIntAs(j, k.dim, false, &v->dim));
  FS_RETURN_IF_ERROR(GetIntAs(j, k.heads, false, &v->num_heads));
  FS_RETURN_IF_ERROR(GetIntAs(j, k.inter, false, &v->inter_dim));
  FS_RETURN_IF_ERROR(GetIntAs(j, k.patch, false, &v->patch_size));
  FS_RETURN_IF_ERROR(GetDouble(j, k.theta, &v->rope_theta));
  FS_RETURN_IF_ERROR(GetIntAs(j, k.ratio, false, &v->downsample_ratio));
  FS_RETURN_IF_ERROR(GetIntAs(j, k.max_tokens, false, &v->max_image_tokens));
  FS_RETURN_IF_ERROR(GetInt(j, k.min_pixels, false, &v->min_pixels));
  if (auto it = j.find(k.max_wh); it != j.end() && it->is_null()) v->max_wh_ratio = 0;
  FS_RETURN_IF_ERROR(GetIntAs(j, k.max_wh, false, &v->max_wh_ratio));
  return Status::Ok();
}

Status Validate(const VisionTowerConfig& v, const char* where) {
  if (v.num_layers < 0 || v.num_layers > 256) return BadKey(where, "has an out-of-range layer count");
  if (!v.present()) return Status::Ok();
  if (v.dim <= 0 || v.num_heads <= 0 || v.dim % v.num_heads != 0 || (v.dim / v.num_heads) % 4 != 0) {
    return BadKey(where, "needs a width divisible by the head count into heads of a multiple of 4");
  }
  if (v.inter_dim <= 0 || v.patch_size <= 0 || v.downsample_ratio <= 0 || v.max_image_tokens < 16 ||
      v.min_pixels < 0 || v.max_wh_ratio < 0) {
    return BadKey(where, "has a non-positive size or ratio");
  }
  return Status::Ok();
}

}  // namespace

Status ParseVisionConfig(const json& root, ModelConfig* c) {
  VisionTowerConfig& v = c->vision;
  if (!c->is_v41()) {  // Vision-Exp: flat keys; a text-only V4 checkpoint has none
    FS_RETURN_IF_ERROR(ReadKeys(root, kFlatKeys, &v));
    FS_RETURN_IF_ERROR(Validate(v, "vision_n_layers"));
    if (!v.present()) return Status::Ok();
    // Its config names no placeholder id (the reference gives span roles ids past the
    // vocabulary): every span position carries image_token_id, V4.1's 129264 unless given.
    FS_RETURN_IF_ERROR(GetInt(root, "image_token_id", false, &c->image_token_id));
    if (c->image_token_id < 0) c->image_token_id = kVisionExpImageToken;
    return Status::Ok();
  }
  auto it = root.find("vision_config");
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return BadKey("vision_config", "must be an object");
  // V4.1's parser defaults where the section is silent.
  v.max_image_tokens = 1024;
  v.min_pixels = 295936;
  v.max_wh_ratio = 0;
  FS_RETURN_IF_ERROR(ReadKeys(*it, kV41Keys, &v));
  return Validate(v, "vision_config");
}

void AddVisionConfig(const ModelConfig& c, nlohmann::ordered_json* root) {
  const VisionTowerConfig& v = c.vision;
  if (!v.present()) return;
  const Keys& k = c.is_v41() ? kV41Keys : kFlatKeys;
  nlohmann::ordered_json out;
  out[k.layers] = v.num_layers;
  out[k.dim] = v.dim;
  out[k.heads] = v.num_heads;
  out[k.inter] = v.inter_dim;
  out[k.patch] = v.patch_size;
  out[k.theta] = v.rope_theta;
  out[k.ratio] = v.downsample_ratio;
  out[k.max_tokens] = v.max_image_tokens;
  out[k.min_pixels] = v.min_pixels;
  if (v.max_wh_ratio > 0) {
    out[k.max_wh] = v.max_wh_ratio;
  } else {
    out[k.max_wh] = nullptr;
  }
  if (c.is_v41()) {
    (*root)["vision_config"] = out;
  } else {
    for (auto& [key, value] : out.items()) (*root)[key] = value;
    if (c.image_token_id != kVisionExpImageToken) (*root)["image_token_id"] = c.image_token_id;
  }
}

}  // namespace flashserve::model::config_json
