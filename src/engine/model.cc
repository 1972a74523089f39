// Model loading (engine/model.h).
#include "engine/model.h"

#include "base/clock.h"
#include "base/huge_pages.h"
#include "base/log.h"

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
  if (options.preload_weights) m->PreloadWeights();  // before the loader reads small tensors in 4 KiB pages
  auto weights = model::LoadModelWeights(*m->checkpoint_, m->config_, m->plan_);
  if (!weights.ok()) return weights.error().WithContext("loading weights from " + dir);
  m->weights_ = std::move(weights).value();
  if (options.head_in_huge_pages) m->CopyHeadToHugePages();
  if (!m->config_.engram.layer_ids.empty()) m->engram_hasher_ = std::make_unique<model::EngramHasher>(m->config_);
  FS_LOG(kInfo, "loaded {}: {} layers (+{} MTP), hidden {}, {} experts, {} tensors, {:.1f} MB", dir,
         m->config_.num_layers, m->config_.num_mtp_layers, m->config_.hidden_size, m->config_.num_routed_experts,
         m->weights_.num_tensors, m->weights_.total_bytes / 1e6);
  return m;
}

void Model::PreloadWeights() {
  const int64_t bytes = checkpoint_->file_bytes();
  const int64_t available = base::AvailableMemoryBytes();
  if (available > 0 && bytes > available) {
    FS_LOG(kWarning, "weights are read on demand: the checkpoint ({:.1f} GB) is larger than the available memory ({:.1f} GB)",
           bytes / 1e9, available / 1e9);
    return;
  }
  const double t0 = base::MonotonicSeconds();
  const model::Checkpoint::Preloaded p = checkpoint_->Preload();
  FS_LOG(kInfo, "weights read into memory: {:.1f} MB in {:.2f} s, {:.1f} MB of it in 2 MiB pages", p.bytes / 1e6,
         base::MonotonicSeconds() - t0, p.huge_bytes / 1e6);
}

void Model::CopyHeadToHugePages() {
  model::Matrix& head = weights_.head;
  if (!head.valid() || !base::TransparentHugePagesAvailable()) return;
  auto copy = base::HugePageBuffer::CopyOf(head.data, static_cast<size_t>(head.rows * head.RowBytes()));
  if (!copy.ok()) {
    FS_LOG(kWarning, "output head stays in the checkpoint mapping: {}", copy.error().ToString());
    return;
  }
  if (copy->HugeBytes() <= 0) {
    FS_LOG(kInfo, "output head stays in the checkpoint mapping: the kernel gave no huge pages");
    return;
  }
  head_copy_ = std::move(copy).value();
  head.data = head_copy_.data();
  FS_LOG(kInfo, "output head copied into huge pages ({:.1f} of {:.1f} MB)", head_copy_.HugeBytes() / 1e6,
         head_copy_.size() / 1e6);
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
  engram_map_ = std::move(map);
  return base::Status::Ok();
}

}  // namespace flashserve::engine
