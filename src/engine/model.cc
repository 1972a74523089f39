// Model loading (engine/model.h).
#include "engine/model.h"

#include <cstring>

#include "base/huge_pages.h"
#include "base/log.h"
#include "kernels/gemm/matmul.h"
#include "kernels/simd/isa.h"

namespace flashserve::engine {

namespace {
kernels::YarnScaling ToYarn(const model::YarnParams& y) {
  return kernels::YarnScaling{y.factor, y.original_max_position, y.beta_fast, y.beta_slow};
}

}  // namespace

Model::Model(std::string dir, model::ModelConfig config, std::unique_ptr<model::Checkpoint> ckpt)
    : dir_(std::move(dir)),
      config_(std::move(config)),
      plan_(model::BuildLayerPlan(config_)),
      checkpoint_(std::move(ckpt)),
      rope_main_(config_.rope_head_dim, config_.rope_theta, kernels::YarnScaling{}),
      rope_compress_(config_.rope_head_dim, config_.compress_rope_theta, ToYarn(config_.yarn)) {}

base::Result<std::unique_ptr<Model>> Model::Load(const std::string& dir, const ModelLoadOptions& options) {
  FS_ASSIGN_OR_RETURN(model::ModelConfig config, model::LoadModelConfig(dir));
  auto ckpt = model::Checkpoint::Open(dir);
  if (!ckpt.ok()) return ckpt.error().WithContext("opening checkpoint " + dir);
  std::unique_ptr<Model> m(new Model(dir, std::move(config), std::move(ckpt).value()));
  if (options.preload_weights) m->checkpoint_->AdviseHugePages();  // before the loader reads small tensors
  auto weights = model::LoadModelWeights(*m->checkpoint_, m->config_, m->plan_);
  if (!weights.ok()) return weights.error().WithContext("loading weights from " + dir);
  m->weights_ = std::move(weights).value();
  PackPlan plan = m->PlanPacking(options);
  if (!plan.entries.empty()) m->ServePacked(plan, options);
  if (options.preload_weights) m->PreloadWeights(plan);  // all but the matrices served from a copy
  if (!m->config_.engram.layer_ids.empty()) m->engram_hasher_ = std::make_unique<model::EngramHasher>(m->config_);
  const base::ResidentBytes rss = base::ProcessResidentBytes();
  FS_LOG(kInfo, "loaded {}: {} layers (+{} MTP), hidden {}, {} experts, {} tensors, {:.1f} MB; resident {:.1f} MB (peak {:.1f})",
         dir, m->config_.num_layers, m->config_.num_mtp_layers, m->config_.hidden_size, m->config_.num_routed_experts,
         m->weights_.num_tensors, m->weights_.total_bytes / 1e6, rss.now / 1e6, rss.peak / 1e6);
  FS_LOG(kInfo, "matrix products: ISA {}, BF16 dot products {} (VDPBF16PS per FMA here: {:.2f}), AMX tiles {}",
         kernels::MatMulIsa(), kernels::Bf16PairsAvailable() ? "on" : "off", kernels::Bf16DotRateVsFma(),
         kernels::AmxOn() ? "on" : kernels::AmxSupported() ? "off (--no-amx)" : "off (not on this CPU)");
  return m;
}

base::Status Model::SetEngramTokenMap(std::vector<int32_t> map, int64_t classes) {
  const model::EngramConfig& e = config_.engram;
  if (engram_hasher_ == nullptr) return base::Status::Ok();  // no Engram layers: nothing to bind
  if (classes != e.compressed_vocab_size)
    return base::Error(base::ErrorCode::kBadTokenizer,
                       "the tokenizer-derived compressed vocabulary has " + std::to_string(classes) +
                           " classes but engram_compressed_vocab_size is " + std::to_string(e.compressed_vocab_size) +
                           " (the Engram hashes would not match the tables; is this the checkpoint's tokenizer?)");
  if (map.empty() || e.pad_id >= static_cast<int64_t>(map.size()))
    return base::Error(base::ErrorCode::kBadTokenizer, "the Engram token map does not cover the pad id " +
                                                           std::to_string(e.pad_id));
  for (int32_t v : map)
    if (v < 0 || v >= classes) return base::Error(base::ErrorCode::kBadTokenizer, "Engram token map value out of range");
  engram_pad_class_ = map[static_cast<size_t>(e.pad_id)];
  // Image placeholders look like the pad to the n-gram hash (v4-architecture.md 5.4).
  const int64_t image = config_.image_token_id;
  if (image >= 0 && image < static_cast<int64_t>(map.size())) map[static_cast<size_t>(image)] = static_cast<int32_t>(engram_pad_class_);
  engram_map_ = std::move(map);
  return base::Status::Ok();
}

}  // namespace flashserve::engine
