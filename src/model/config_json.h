// JSON field readers shared by the config.json parsers (config.cc, config_v41.cc): typed
// lookups whose errors name the key. Internal to the model room.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/config.h"

namespace flashserve::model::config_json {

using base::Error;
using base::ErrorCode;
using base::Status;
using nlohmann::json;

inline Error BadKey(const std::string& key, const std::string& what) {
  return Error(ErrorCode::kBadConfig, "config.json: '" + key + "' " + what);
}
inline Error Unsupported(const std::string& key, const std::string& what) {
  return Error(ErrorCode::kUnsupportedConfig, "config.json: '" + key + "' " + what);
}

// Reads an integer key; `required` keys must exist, others keep *out.
inline Status GetInt(const json& j, const std::string& key, bool required, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return BadKey(key, "is missing");
    return Status::Ok();
  }
  if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else if (it->is_number_float() && std::abs(it->get<double>()) < 0x1p62 &&
             it->get<double>() == static_cast<double>(static_cast<int64_t>(it->get<double>()))) {
    *out = static_cast<int64_t>(it->get<double>());
  } else {
    return BadKey(key, "must be an integer");
  }
  return Status::Ok();
}

template <typename T>
Status GetIntAs(const json& j, const std::string& key, bool required, T* out) {
  int64_t v = static_cast<int64_t>(*out);
  FS_RETURN_IF_ERROR(GetInt(j, key, required, &v));
  *out = static_cast<T>(v);
  return Status::Ok();
}

inline Status GetDouble(const json& j, const std::string& key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return BadKey(key, "must be a number");
  *out = it->get<double>();
  return Status::Ok();
}

// Reads a list of integers stored under one of several spellings (the first present wins).
inline Status GetIntList(const json& j, std::initializer_list<const char*> keys, std::vector<int>* out) {
  for (const char* key : keys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_array()) return BadKey(key, "must be an array of integers");
    out->clear();
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return BadKey(key, "entries must be integers");
      out->push_back(v.get<int>());
    }
    return Status::Ok();
  }
  return Status::Ok();
}

// V4.1 (config_v41.cc): the text section of a composite config (text_config, with the
// top-level quantization_config when the section has none), the V4.1-only fields under both
// their config.json and inference/config.json spellings, and the composite serialisation.
base::Result<json> V41TextSection(const json& root);
Status ParseV41Fields(const json& text, ModelConfig* c);
std::string V41ConfigToJson(const ModelConfig& c);

// The vision tower (config_vision.cc): V4.1 reads root["vision_config"] (Hugging Face names),
// V4 the flat `vision_*` keys of Vision-Exp; writes them back the same way.
Status ParseVisionConfig(const json& root, ModelConfig* c);
void AddVisionConfig(const ModelConfig& c, nlohmann::ordered_json* root);

// The DSpark drafter (config_dspark.cc): the `dspark_*` keys of a V4 checkpoint that ships one
// (V4-Flash-0731's layout); its stages become the layers after the trunk. Written back the same way.
Status ParseDsparkConfig(const json& j, ModelConfig* c);
void AddDsparkConfig(const ModelConfig& c, nlohmann::ordered_json* root);

}  // namespace flashserve::model::config_json
