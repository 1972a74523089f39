// The encode thread, tower runs and span assembly (serve/image_encoder.h).
#include "serve/image_encoder.h"

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "engine/vision_tower.h"

namespace flashserve::serve {

using base::ErrorCode;

ImageEncoder::ImageEncoder(const engine::Model& model, int threads, EncoderCache* cache, int64_t batch_pixels)
    : model_(model), cache_(cache), batch_pixels_(batch_pixels), pool_(threads), tower_(model, pool_),
      thread_([this] { Run(); }) {}

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

namespace {
int64_t PixelsOf(const std::vector<protocol::ImageInput>& images, int patch_size) {
  int64_t pixels = 0;
  for (const protocol::ImageInput& image : images) pixels += int64_t{image.vit_h} * image.vit_w * patch_size * patch_size;
  return pixels;
}
}  // namespace

std::vector<ImageEncoder::Job> ImageEncoder::TakeJobs() {
  const int patch = model_.config().vision.patch_size;
  std::vector<Job> jobs;
  int64_t pixels = 0;
  while (!jobs_.empty()) {
    const int64_t more = PixelsOf(jobs_.front().images, patch);
    if (!jobs.empty() && pixels + more > batch_pixels_) break;
    pixels += more;
    jobs.push_back(std::move(jobs_.front()));
    jobs_.pop_front();
  }
  return jobs;
}

void ImageEncoder::Run() {
  for (;;) {
    std::vector<Job> jobs;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      jobs = TakeJobs();
    }
    EncodeJobs(jobs);
  }
}

// Every picture of the jobs from the cache, the rest (each distinct one once) through one tower
// run; then each job's answer, or its first error.
void ImageEncoder::EncodeJobs(std::vector<Job>& jobs) {
  struct Slot {
    EncodedPicture picture;
    int miss = -1;           // index into misses when it waits for this run
    bool repeated = false;   // another picture of this run carries the same key
  };
  std::vector<std::vector<Slot>> slots(jobs.size());
  std::vector<base::Status> errors(jobs.size());
  std::vector<const protocol::ImageInput*> misses;
  std::map<ImageKey, int> miss_of;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (const protocol::ImageInput& image : jobs[j].images) {
      Slot slot{EncodedPicture{image.key, nullptr, true}, -1};
      if (!model_.config().vision.present()) {
        errors[j] = base::MakeError(ErrorCode::kInvalidArgument, "this model has no vision tower");
      } else if (auto pending = miss_of.find(image.key); pending != miss_of.end()) {
        slot.miss = pending->second;
        slot.repeated = true;
      } else if ((slot.picture.rows = cache_->Find(image.key, /*outer_tiers=*/true)) == nullptr) {
        const engine::PicturePatches patches{image.patches, image.vit_h, image.vit_w};
        base::Status ok = image.patches.empty()
                              ? base::MakeError(ErrorCode::kInvalidArgument, "a picture neither cached nor carrying its patches")
                              : tower_.Check(patches);
        if (!ok.ok()) {
          if (errors[j].ok()) errors[j] = ok;
        } else {
          slot.miss = static_cast<int>(misses.size());
          miss_of.emplace(image.key, slot.miss);
          misses.push_back(&image);
        }
      }
      slots[j].push_back(std::move(slot));
    }
  }
  base::Result<std::vector<ImageRows>> encoded = EncodeMisses(misses);
  for (size_t j = 0; j < jobs.size(); ++j) {
    queued_ -= static_cast<int64_t>(jobs[j].images.size());
    std::vector<EncodedPicture> out;
    for (Slot& slot : slots[j]) {
      if (slot.miss >= 0 && !encoded.ok() && errors[j].ok()) errors[j] = encoded.error();
      if (slot.miss >= 0 && encoded.ok()) {
        slot.picture.rows = (*encoded)[static_cast<size_t>(slot.miss)];
        slot.picture.cached = slot.repeated;
      }
      out.push_back(std::move(slot.picture));
    }
    if (!errors[j].ok()) {
      jobs[j].done(errors[j].error());
    } else {
      jobs[j].done(std::move(out));
    }
  }
}

// One tower run over the pictures; each goes into the cache with its share of the run's time
// (by rows).
base::Result<std::vector<ImageRows>> ImageEncoder::EncodeMisses(const std::vector<const protocol::ImageInput*>& misses) {
  std::vector<ImageRows> out;
  if (misses.empty()) return out;
  std::vector<engine::PicturePatches> batch;
  int64_t rows = 0;
  for (const protocol::ImageInput* image : misses) {
    batch.push_back({image->patches, image->vit_h, image->vit_w});
    rows += int64_t{image->vit_h} * image->vit_w;
  }
  const auto start = std::chrono::steady_clock::now();
  FS_ASSIGN_OR_RETURN(std::vector<std::vector<float>> encoded, tower_.EncodeBatch(batch));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++batches_;
  for (size_t i = 0; i < misses.size(); ++i) {
    out.push_back(std::make_shared<const std::vector<float>>(std::move(encoded[i])));
    const double share = static_cast<double>(int64_t{misses[i]->vit_h} * misses[i]->vit_w) / static_cast<double>(rows);
    cache_->Insert(misses[i]->key, out.back(), seconds * share);
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
