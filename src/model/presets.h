// Named model configurations for generated checkpoints: "tiny" (v4-architecture.md
// section 11: every attention type x both MoE kinds + MTP), "medium" (benchmark sized,
// ~1.5 GB, FP8 dense + FP4 experts), their DSpark siblings "tiny-dspark" / "medium-dspark" and
// V4.1 siblings "tiny-v41" / "medium-v41".
// Pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "model/config.h"

namespace flashserve::model {

ModelConfig TinyPreset();
ModelConfig MediumPreset();
VisionTowerConfig TinyVisionTower();  // two narrow layers, the released preprocessing
ModelConfig TinyV41Preset();    // v4-architecture.md section 11 V4.1 tiny (Reuse, Reindex, both ratios)
ModelConfig MediumV41Preset();  // benchmark-sized V4.1
ModelConfig TowerV41Preset();   // tiny-v41 with the released vision tower (bench-vision)
ModelConfig TinyVisionExpPreset();  // tiny (V4) with a small tower, as DeepSeek-V4-Flash-Vision-Exp
// A V4 preset laid out as DeepSeek-V4-Flash-0731: three DSpark stages (blocks of 5, fed by the last
// three trunk layers, Markov rank 256) in place of the MTP block.
ModelConfig WithDspark(ModelConfig c);
base::Result<ModelConfig> PresetByName(const std::string& name);
std::vector<std::string> PresetNames();

}  // namespace flashserve::model
