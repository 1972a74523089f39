// The colocated encode stage: a request's pictures through the model's vision tower into the
// embeddings of their placeholder spans, with an in-memory cache of tower outputs by content key
// (bounded by bytes, oldest out first), so a screenshot that comes back every turn is encoded
// once. Engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/model.h"
#include "kv/block_hash.h"
#include "protocol/generate.h"

namespace flashserve::serve {

// A prompt's pictures as the engine takes them: the rows they fill and their embeddings.
struct EncodedImages {
  std::vector<kv::ImageExtent> extents;  // for the prefix cache
  std::vector<int32_t> rows;             // prompt positions, increasing
  std::vector<float> embeddings;         // [rows.size()][hidden]
};

struct EncoderStats {
  int64_t hits = 0, misses = 0, bytes = 0;
  double encode_seconds = 0;
};

class ImageEncoder {
 public:
  ImageEncoder(const engine::Model& model, int threads, int64_t cache_bytes);

  // kInvalidArgument when the spans do not fit the prompt or the model has no tower.
  base::Result<EncodedImages> Encode(const std::vector<int32_t>& prompt,
                                     const std::vector<protocol::ImageInput>& images);
  const EncoderStats& stats() const { return stats_; }

 private:
  using Rows = std::shared_ptr<const std::vector<float>>;
  base::Result<Rows> AlignerRows(const protocol::ImageInput& image);
  base::ThreadPool& Pool();

  const engine::Model& model_;
  int threads_;
  std::unique_ptr<base::ThreadPool> pool_;  // made on the first picture
  int64_t cache_bytes_;
  std::map<std::array<uint8_t, 32>, Rows> cache_;
  std::deque<std::array<uint8_t, 32>> order_;  // insertion order, for eviction
  EncoderStats stats_;
};

}  // namespace flashserve::serve
