// Layer plan construction (model/layer_plan.h).
#include "model/layer_plan.h"

#include <algorithm>

namespace flashserve::model {

namespace {

int LatestAtOrBefore(const std::vector<int>& v, int x) {
  int best = -1;
  for (int e : v)
    if (e <= x) best = std::max(best, e);
  return best;
}

void AssignV4Roles(LayerSpec* s) {
  s->attention = s->compress_ratio == 0   ? AttentionKind::kSliding
                 : s->compress_ratio == 4 ? AttentionKind::kCsa
                                          : AttentionKind::kHca;
  if (s->compress_ratio == 0) return;
  const bool csa = s->attention == AttentionKind::kCsa;
  s->kv_source = s->index;
  s->owns_compressor = true;
  s->compressor_overlap = csa;
  s->owns_index_keys = csa;
  s->index_compressor = csa;
  s->runs_indexer = csa;
  s->index_source = csa ? s->index : -1;
}

void AssignV41Roles(const ModelConfig& c, LayerSpec* s) {
  if (s->compress_ratio == 0) {
    s->attention = AttentionKind::kSliding;
    return;
  }
  s->attention = AttentionKind::kCsa2;
  s->kv_source = LatestAtOrBefore(c.kv_source_layers, s->index);
  s->index_source = LatestAtOrBefore(c.index_source_layers, s->index);
  s->owns_compressor = s->kv_source == s->index;
  s->owns_index_keys = s->owns_compressor;
  s->runs_indexer = s->index_source == s->index;
  s->candidate_source = s->index == c.candidate_source_layer;
  s->uses_candidates = s->runs_indexer && c.candidate_source_layer >= 0 && c.candidate_source_layer < s->index;
}

}  // namespace

LayerPlan BuildLayerPlan(const ModelConfig& config) {
  LayerPlan plan;
  for (int i = 0; i < config.total_layers(); ++i) {
    LayerSpec s;
    s.index = i;
    s.is_mtp = i >= config.num_layers;
    if (s.is_mtp && config.dspark.present()) s.dspark_stage = i - config.num_layers;
    s.compress_ratio = config.compress_ratios[static_cast<size_t>(i)];
    if (config.is_v41()) {
      AssignV41Roles(config, &s);
    } else {
      AssignV4Roles(&s);
    }
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
    case AttentionKind::kCsa2: return "CSA2";
  }
  return "?";
}

}  // namespace flashserve::model
