// A loaded DeepSeek-V4 / V4.1 model: config, layer plan, the mapped checkpoint and the weight
// views, the two RoPE tables and (V4.1 Engram) the hash layout and token classes. Built by
// Load, completed by SetEngramTokenMap before any Engine uses it (app/cli_util.cc); immutable
// afterwards and shared read-only by engines and threads.
#pragma once

#include <memory>
#include <string>

#include "base/huge_pages.h"
#include "base/result.h"
#include "kernels/norm_rope/norm_rope.h"
#include "model/config.h"
#include "model/engram_layout.h"
#include "model/layer_plan.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace flashserve::engine {

struct ModelLoadOptions {
  // Copy the output head (vocab x hidden, read whole for every decode step) into anonymous
  // memory in 2 MiB pages where transparent huge pages are available: the checkpoint mapping's
  // 4 KiB pages cost TLB misses (a faster head at medium's decode batch 1). Costs a
  // second copy of the head in memory (1.06 GB for V4-Flash, 1.85 GB for V4-Pro); kept only if
  // the kernel backs it with huge pages.
  bool head_in_huge_pages = true;
  // Read the whole checkpoint into memory at load, in 2 MiB pages where the kernel gives them
  // (model::Checkpoint::Preload), instead of on demand in whatever pages the first touches
  // leave: the streaming reads of decode then take fewer TLB misses (medium decodes faster at
  // batch 1 and 8; docs/benchmarks.md). Skipped, with a log line,
  // where the shards are larger than the memory available.
  bool preload_weights = true;
  // Where the kernels decode FP4 faster from model::Fp4Layout::kLanePairs
  // (kernels::PrefersFp4LanePairs: AVX-512), copy every FP4 matrix into that layout, in
  // anonymous memory in 2 MiB pages where available (a one-time copy at load; decode batch 8's
  // experts run faster, docs/benchmarks.md). The same logits. The copy
  // replaces the mapping's pages in use (those stay in the page cache, reclaimable); skipped,
  // with a log line, where the FP4 bytes exceed the memory available.
  bool fp4_lane_pairs = true;
};

class Model {
 public:
  // Reads config.json and the safetensors files of `dir`, validating every tensor.
  static base::Result<std::unique_ptr<Model>> Load(const std::string& dir, const ModelLoadOptions& options = {});

  const model::ModelConfig& config() const { return config_; }
  const model::LayerPlan& plan() const { return plan_; }
  const model::ModelWeights& weights() const { return weights_; }
  const model::LayerWeights& layer(int i) const { return weights_.layers[static_cast<size_t>(i)]; }
  // RoPE table for a layer's own Q/KV, its compressed entries and its indexer.
  const kernels::RopeTable& rope(model::RopeTable which) const {
    return which == model::RopeTable::kMain ? rope_main_ : rope_compress_;
  }
  const std::string& dir() const { return dir_; }

  // V4.1 Engram: the tokenizer-derived map of token ids to compressed classes (HF41's
  // build_compressed_token_map; tokenizer::BuildEngramTokenMap). Required before Forward when
  // the model has Engram layers; `classes` must equal engram_compressed_vocab_size.
  bool needs_engram_token_map() const { return engram_hasher_ != nullptr && engram_map_.empty(); }
  base::Status SetEngramTokenMap(std::vector<int32_t> map, int64_t classes);
  const model::EngramHasher* engram_hasher() const { return engram_hasher_.get(); }
  // A token's class (ids past the map, e.g. unused embedding rows, count as the pad).
  int64_t EngramClass(int32_t token) const {
    return token >= 0 && static_cast<size_t>(token) < engram_map_.size() ? engram_map_[static_cast<size_t>(token)]
                                                                         : engram_pad_class_;
  }
  int64_t engram_pad_class() const { return engram_pad_class_; }
  const model::Checkpoint& checkpoint() const { return *checkpoint_; }
  // Whether the output head is served from the huge-page copy (ModelLoadOptions).
  bool head_in_huge_pages() const { return head_copy_.data() != nullptr; }
  // Whether the FP4 matrices are served from the lane-pair copy (ModelLoadOptions).
  bool fp4_lane_pairs() const { return fp4_copy_.data() != nullptr; }

 private:
  Model(std::string dir, model::ModelConfig config, std::unique_ptr<model::Checkpoint> ckpt);
  void PreloadWeights();
  void CopyHeadToHugePages();
  void RepackFp4ToLanePairs();

  std::string dir_;
  model::ModelConfig config_;
  model::LayerPlan plan_;
  std::unique_ptr<model::Checkpoint> checkpoint_;
  model::ModelWeights weights_;
  kernels::RopeTable rope_main_;
  kernels::RopeTable rope_compress_;
  std::unique_ptr<model::EngramHasher> engram_hasher_;
  std::vector<int32_t> engram_map_;
  int64_t engram_pad_class_ = 0;
  base::HugePageBuffer head_copy_;  // the output head in 2 MiB pages (see Load)
  base::HugePageBuffer fp4_copy_;   // every FP4 matrix in the lane-pair layout (see Load)
};

}  // namespace flashserve::engine
