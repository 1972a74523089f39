// A loaded DeepSeek-V4 / V4.1 model: config, layer plan, the mapped checkpoint and the weight
// views, the two RoPE tables and (V4.1 Engram) the hash layout and token classes. Built by
// Load, completed by SetEngramTokenMap before any Engine uses it (app/cli_util.cc); immutable
// afterwards and shared read-only by engines and threads.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "base/result.h"
#include "kernels/norm_rope/norm_rope.h"
#include "model/config.h"
#include "model/engram_layout.h"
#include "model/layer_plan.h"
#include "model/packed_weights.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace flashserve::engine {

struct ModelLoadOptions {
  // Serve the output head (vocab x hidden, read whole for every decode step) from the packed
  // copy in 2 MiB pages (packed_dir) where transparent huge pages are available: the checkpoint
  // mapping's 4 KiB pages cost TLB misses (a faster head at medium's decode batch 1). Its
  // pages replace the checkpoint's.
  bool head_in_huge_pages = true;
  // Read the whole checkpoint into memory at load, in 2 MiB pages where the kernel gives them
  // (model::Checkpoint::Preload), instead of on demand in whatever pages the first touches
  // leave: the streaming reads of decode then take fewer TLB misses (medium decodes faster at
  // batch 1 and 8; docs/benchmarks.md). Skipped, with a log line,
  // where the shards are larger than the memory available.
  bool preload_weights = true;
  // Where the kernels decode FP4 faster from model::Fp4Layout::kLanePairs
  // (kernels::PrefersFp4LanePairs: AVX-512), serve every FP4 matrix in that layout (decode
  // batch 8's experts run faster, docs/benchmarks.md). The same logits.
  bool fp4_lane_pairs = true;
  // Where the repacked matrices (the lane-pair experts, the huge-page head) live: a packed
  // weights file in this directory (model/packed_weights.h), built on the first start and mapped
  // on later ones (shared by processes, ready without repacking); empty: repacked into anonymous
  // memory at every start. Either way the checkpoint's pages of those matrices are released, so
  // one copy of the weights is resident.
  std::string packed_dir;
  // Smaller repacked sets stay in anonymous memory (quick to repack; no files for test models).
  int64_t packed_file_min_bytes = int64_t{64} << 20;
};

// How the repacked matrices are served (Model::packing).
enum class PackedFrom : uint8_t {
  kNone,         // nothing repacked: every matrix reads the checkpoint mapping
  kMemory,       // repacked at load into anonymous memory
  kFile,         // mapped from the packed weights file
  kFileCopied,   // read from the packed weights file into anonymous 2 MiB pages (its own pages were small)
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
  // Whether the output head is served from the packed copy (in 2 MiB pages where the kernel
  // gives them; ModelLoadOptions).
  bool head_in_huge_pages() const { return head_packed_; }
  // Whether the FP4 matrices are served in the lane-pair layout (ModelLoadOptions).
  bool fp4_lane_pairs() const { return fp4_packed_; }
  PackedFrom packing() const { return packing_; }
  // The repacked matrices' bytes in memory (the packed file's payload or the anonymous copy;
  // empty where nothing is repacked): the largest resident region a benchmark may read.
  std::span<const uint8_t> packed_region() const;
  // The packed weights file this model reads or was built from ("" where none).
  const std::string& packed_file_path() const { return packed_path_; }

 private:
  Model(std::string dir, model::ModelConfig config, std::unique_ptr<model::Checkpoint> ckpt);
  // The matrices to serve from a repacked copy, and where each view goes (model_packing.cc).
  struct PackPlan {
    std::vector<model::PackEntry> entries;
    std::vector<model::Matrix*> targets;
    bool head = false, fp4 = false;
  };
  PackPlan PlanPacking(const ModelLoadOptions& options);
  void ServePacked(const PackPlan& plan, const ModelLoadOptions& options);
  bool ServeFromFile(const PackPlan& plan, const ModelLoadOptions& options);
  void ServeFromMemory(const PackPlan& plan);
  void ReleaseSources(const model::PackEntry& e) const;  // the checkpoint's pages of its matrix
  void PreloadWeights(const PackPlan& plan);

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
  std::optional<model::PackedWeightsFile> packed_file_;  // PackedFrom::kFile
  base::HugePageBuffer packed_copy_;                      // kMemory, kFileCopied: the entries' bytes
  PackedFrom packing_ = PackedFrom::kNone;
  std::string packed_path_;
  bool head_packed_ = false, fp4_packed_ = false;
};

}  // namespace flashserve::engine
