// Layer plan construction (model/layer_plan.h).
#include "model/layer_plan.h"

namespace flashserve::model {

LayerPlan BuildLayerPlan(const ModelConfig& config) {
  LayerPlan plan;
  for (int i = 0; i < config.total_layers(); ++i) {
    LayerSpec s;
    s.index = i;
    s.is_mtp = i >= config.num_layers;
    s.compress_ratio = config.compress_ratios[static_cast<size_t>(i)];
    s.attention = s.compress_ratio == 0   ? AttentionKind::kSliding
                  : s.compress_ratio == 4 ? AttentionKind::kCsa
                                          : AttentionKind::kHca;
    s.hash_moe = !s.is_mtp && i < config.num_hash_layers;
    s.rope = s.compress_ratio == 0 ? RopeTable::kMain : RopeTable::kCompress;
    s.prefix = s.is_mtp ? "mtp." + std::to_string(i - config.num_layers) + "."
                        : "layers." + std::to_string(i) + ".";
    plan.push_back(s);
  }
  return plan;
}

const char* AttentionKindName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kSliding: return "SWA";
    case AttentionKind::kCsa: return "CSA";
    case AttentionKind::kHca: return "HCA";
  }
  return "?";
}

}  // namespace flashserve::model
