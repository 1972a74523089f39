// The encode thread, tower runs and span assembly (serve/image_encoder.h).
#include "serve/image_encoder.h"

#include <chrono>

#include <fmt/format.h>

#include "engine/vision_tower.h"

namespace flashserve::serve {

using base::ErrorCode;

ImageEncoder::ImageEncoder(const engine::Model& model, int threads, EncoderCache* cache)
    : model_(model), cache_(cache), pool_(threads), thread_([this] { Run(); }) {}

ImageEncoder::~ImageEncoder() { Stop(); }

void ImageEncoder::Submit(std::vector<protocol::ImageInput> images, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued_ += static_cast<int64_t>(images.size());
    jobs_.push_back(Job{std::move(images), std::move(done)});
  }
  wake_.notify_one();
}

void ImageEncoder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    for (const Job& job : jobs_) queued_ -= static_cast<int64_t>(job.images.size());
    jobs_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ImageEncoder::Run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    auto result = EncodeAll(job.images);
    queued_ -= static_cast<int64_t>(job.images.size());
    job.done(std::move(result));
  }
}

base::Result<std::vector<EncodedPicture>> ImageEncoder::EncodeAll(const std::vector<protocol::ImageInput>& images) {
  if (!model_.config().vision.present())
    return base::MakeError(ErrorCode::kInvalidArgument, "this model has no vision tower");
  std::vector<EncodedPicture> out;
  for (const protocol::ImageInput& image : images) {
    EncodedPicture picture{image.key, cache_->Find(image.key, /*outer_tiers=*/true), true};
    if (!picture.rows) {
      if (image.patches.empty())
        return base::MakeError(ErrorCode::kInvalidArgument, "a picture neither cached nor carrying its patches");
      engine::VisionTower tower(model_, pool_);
      const auto start = std::chrono::steady_clock::now();
      FS_ASSIGN_OR_RETURN(std::vector<float> rows, tower.Encode(image.patches, image.vit_h, image.vit_w));
      picture.rows = std::make_shared<const std::vector<float>>(std::move(rows));
      picture.cached = false;
      cache_->Insert(image.key, picture.rows,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    out.push_back(std::move(picture));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> BidirectionalSpans(const engine::Model& model,
                                                             const std::vector<protocol::ImageInput>& images) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const protocol::ImageInput& image : images) {
    if (auto part = engine::BidirectionalPart(model, image.roles))
      spans.emplace_back(image.start + part->first, image.start + part->second);
  }
  return spans;
}

base::Result<EncodedImages> SpanInputs(const engine::Model& model, int64_t prompt_tokens,
                                       const std::vector<protocol::ImageInput>& images,
                                       const std::vector<EncodedPicture>& pictures) {
  const int64_t d = model.config().hidden_size;
  if (pictures.size() != images.size())
    return base::MakeError(ErrorCode::kInvalidArgument, "pictures and their encodings do not match");
  EncodedImages out;
  int64_t end_of_last = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const protocol::ImageInput& image = images[i];
    const int64_t length = static_cast<int64_t>(image.roles.size());
    if (image.start < end_of_last || length == 0 || image.start + length > prompt_tokens)
      return base::MakeError(ErrorCode::kInvalidArgument, fmt::format("image {}: its span does not fit the prompt", i));
    FS_ASSIGN_OR_RETURN(std::vector<float> span,
                        engine::SpanEmbeddings(model, image.roles, image.image_rows, *pictures[i].rows));
    for (int64_t p = 0; p < length; ++p) out.rows.push_back(static_cast<int32_t>(image.start + p));
    out.embeddings.insert(out.embeddings.end(), span.begin(), span.end());
    out.extents.push_back({image.start, length, image.key});
    end_of_last = image.start + length;
  }
  if (static_cast<int64_t>(out.embeddings.size()) != static_cast<int64_t>(out.rows.size()) * d)
    return base::MakeError(ErrorCode::kInternal, "span embeddings of the wrong size");
  out.bidirectional = BidirectionalSpans(model, images);
  return out;
}

}  // namespace flashserve::serve
