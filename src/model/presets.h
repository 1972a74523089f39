// Named model configurations for generated checkpoints: "tiny" (v4-architecture.md
// section 11: every attention type x both MoE kinds + MTP) and "medium" (benchmark sized,
// ~1.5 GB, FP8 dense + FP4 experts). Pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "model/config.h"

namespace flashserve::model {

ModelConfig TinyPreset();
ModelConfig MediumPreset();
base::Result<ModelConfig> PresetByName(const std::string& name);
std::vector<std::string> PresetNames();

}  // namespace flashserve::model
