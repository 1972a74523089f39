// Tower runs and the encoder cache (serve/image_encoder.h).
#include "serve/image_encoder.h"

#include <chrono>

#include <fmt/format.h>

#include "engine/vision_tower.h"

namespace flashserve::serve {

using base::ErrorCode;

ImageEncoder::ImageEncoder(const engine::Model& model, int threads, int64_t cache_bytes)
    : model_(model), threads_(threads), cache_bytes_(cache_bytes) {}

base::ThreadPool& ImageEncoder::Pool() {
  if (!pool_) pool_ = std::make_unique<base::ThreadPool>(threads_);
  return *pool_;
}

base::Result<ImageEncoder::Rows> ImageEncoder::AlignerRows(const protocol::ImageInput& image) {
  if (auto it = cache_.find(image.key); it != cache_.end()) {
    ++stats_.hits;
    return it->second;
  }
  ++stats_.misses;
  engine::VisionTower tower(model_, Pool());
  const auto start = std::chrono::steady_clock::now();
  FS_ASSIGN_OR_RETURN(std::vector<float> encoded, tower.Encode(image.patches, image.vit_h, image.vit_w));
  stats_.encode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto rows = std::make_shared<const std::vector<float>>(std::move(encoded));
  const int64_t bytes = static_cast<int64_t>(rows->size() * sizeof(float));
  if (bytes > cache_bytes_) return rows;  // larger than the whole cache: used once, not kept
  while (!order_.empty() && stats_.bytes + bytes > cache_bytes_) {
    auto old = cache_.find(order_.front());
    stats_.bytes -= static_cast<int64_t>(old->second->size() * sizeof(float));
    cache_.erase(old);
    order_.pop_front();
  }
  cache_.emplace(image.key, rows);
  order_.push_back(image.key);
  stats_.bytes += bytes;
  return rows;
}

base::Result<EncodedImages> ImageEncoder::Encode(const std::vector<int32_t>& prompt,
                                                 const std::vector<protocol::ImageInput>& images) {
  const model::ModelConfig& c = model_.config();
  if (!c.vision.present()) return base::MakeError(ErrorCode::kInvalidArgument, "this model has no vision tower");
  const int64_t d = c.hidden_size;
  engine::VisionTower tower(model_, Pool());
  EncodedImages out;
  int64_t end_of_last = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const protocol::ImageInput& image = images[i];
    const int64_t length = static_cast<int64_t>(image.roles.size());
    if (image.start < end_of_last || length == 0 || image.start + length > static_cast<int64_t>(prompt.size())) {
      return base::MakeError(ErrorCode::kInvalidArgument, fmt::format("image {}: its span does not fit the prompt", i));
    }
    FS_ASSIGN_OR_RETURN(Rows rows, AlignerRows(image));
    FS_ASSIGN_OR_RETURN(std::vector<float> span, tower.SpanEmbeddings(image.roles, image.image_rows, *rows));
    for (int64_t p = 0; p < length; ++p) out.rows.push_back(static_cast<int32_t>(image.start + p));
    out.embeddings.insert(out.embeddings.end(), span.begin(), span.end());
    out.extents.push_back({image.start, length, image.key});
    end_of_last = image.start + length;
  }
  if (static_cast<int64_t>(out.embeddings.size()) != static_cast<int64_t>(out.rows.size()) * d) {
    return base::MakeError(ErrorCode::kInternal, "span embeddings of the wrong size");
  }
  return out;
}

}  // namespace flashserve::serve
