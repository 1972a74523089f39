// Model loading (engine/model.h).
#include "engine/model.h"

#include <cstring>

#include "base/clock.h"
#include "base/huge_pages.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "kernels/gemm/matmul.h"
#include "kernels/simd/isa.h"

namespace flashserve::engine {

namespace {
kernels::YarnScaling ToYarn(const model::YarnParams& y) {
  return kernels::YarnScaling{y.factor, y.original_max_position, y.beta_fast, y.beta_slow};
}

// Whether `bytes` fit in the available memory (true where that cannot be read); logs `fallback`
// (what happens instead) where they do not.
bool FitsInMemory(int64_t bytes, const char* what, const char* fallback) {
  const int64_t available = base::AvailableMemoryBytes();
  if (available <= 0 || bytes <= available) return true;
  FS_LOG(kWarning, "{}: {} ({:.1f} GB) need more than the available memory ({:.1f} GB)", fallback, what, bytes / 1e9,
         available / 1e9);
  return false;
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
  if (options.fp4_lane_pairs && kernels::PrefersFp4LanePairs()) m->RepackFp4ToLanePairs();
  if (!m->config_.engram.layer_ids.empty()) m->engram_hasher_ = std::make_unique<model::EngramHasher>(m->config_);
  FS_LOG(kInfo, "loaded {}: {} layers (+{} MTP), hidden {}, {} experts, {} tensors, {:.1f} MB", dir,
         m->config_.num_layers, m->config_.num_mtp_layers, m->config_.hidden_size, m->config_.num_routed_experts,
         m->weights_.num_tensors, m->weights_.total_bytes / 1e6);
  FS_LOG(kInfo, "matrix products: ISA {}, BF16 dot products {} (VDPBF16PS per FMA here: {:.2f}), AMX tiles {}",
         kernels::MatMulIsa(), kernels::Bf16PairsAvailable() ? "on" : "off", kernels::Bf16DotRateVsFma(),
         kernels::AmxOn() ? "on" : kernels::AmxSupported() ? "off (--no-amx)" : "off (not on this CPU)");
  return m;
}

void Model::PreloadWeights() {
  if (!FitsInMemory(checkpoint_->file_bytes(), "the checkpoint's files", "weights are read on demand")) return;
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

namespace {

// Bytes of an FP4 matrix's repacked copy: its codes, then its scales, 64-byte aligned.
int64_t RepackedBytes(const model::Matrix& m) {
  return (m.rows * m.RowBytes() + m.NumScales() + 63) / 64 * 64;
}

}  // namespace

void Model::RepackFp4ToLanePairs() {
  std::vector<model::Matrix*> fp4;
  int64_t bytes = 0;
  for (model::LayerWeights& layer : weights_.layers) {
    std::vector<model::ExpertWeights*> experts = {&layer.moe.shared};
    for (model::ExpertWeights& e : layer.moe.experts) experts.push_back(&e);
    for (model::ExpertWeights* e : experts)
      for (model::Matrix* m : {&e->w1, &e->w2, &e->w3})
        if (m->valid() && m->format == model::MatrixFormat::kFp4 && m->cols % 32 == 0 && m->tile_cols == 32 &&
            m->rows % model::kFp4GroupRows == 0) {
          fp4.push_back(m);
          bytes += RepackedBytes(*m);
        }
  }
  if (fp4.empty() || !FitsInMemory(bytes, "their repacked copy", "FP4 experts stay in checkpoint order")) return;
  const double t0 = base::MonotonicSeconds();
  std::vector<model::Matrix> packed(fp4.size());
  std::vector<int64_t> offsets(fp4.size() + 1, 0);
  for (size_t i = 0; i < fp4.size(); ++i) offsets[i + 1] = offsets[i] + RepackedBytes(*fp4[i]);
  base::ThreadPool pool;  // all cores, for the load only
  auto copy = base::HugePageBuffer::Filled(static_cast<size_t>(bytes), [&](uint8_t* dst) {
    pool.ParallelFor(static_cast<int64_t>(fp4.size()), 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        // The scales follow the codes, in the same 2 MiB pages (from the checkpoint mapping's
        // 4 KiB pages they cost the decoders TLB walks and prefetcher stops).
        packed[i] = fp4[i]->RepackFp4LanePairs(dst + offsets[i]);
      }
    });
  });
  if (!copy.ok()) {
    FS_LOG(kWarning, "FP4 experts stay in checkpoint order: {}", copy.error().ToString());
    return;
  }
  fp4_copy_ = std::move(copy).value();
  for (size_t i = 0; i < fp4.size(); ++i) *fp4[i] = packed[i];
  FS_LOG(kInfo, "FP4 experts repacked for the AVX-512 decoders: {} matrices, {:.1f} MB in {:.2f} s ({:.1f} MB in 2 MiB pages)",
         fp4.size(), bytes / 1e6, base::MonotonicSeconds() - t0, fp4_copy_.HugeBytes() / 1e6);
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
