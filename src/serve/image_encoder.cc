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
    std::lock_guard<std::mutex> lock(mu_);
    if (jobs_.empty()) tower_.ReleaseScratch();  // idle: the activations go back
  }
}

// Pass one over the jobs: each picture from the cache, or waiting for a run (each distinct key
// once: `plan.misses`), or the job's first error.
ImageEncoder::Plan ImageEncoder::PlanJobs(const std::vector<Job>& jobs) {
  Plan plan;
  plan.slots.resize(jobs.size());
  plan.errors.resize(jobs.size());
  std::map<ImageKey, int> miss_of;
  for (size_t j = 0; j < jobs.size(); ++j) {
    base::Status& error = plan.errors[j];
    if (!model_.config().vision.present())
      error = base::MakeError(ErrorCode::kInvalidArgument, "this model has no vision tower");
    for (const protocol::ImageInput& image : jobs[j].images) {
      if (!error.ok()) break;
      Slot& slot = plan.slots[j].emplace_back(Slot{EncodedPicture{image.key, nullptr, true}, -1, false});
      if (auto pending = miss_of.find(image.key); pending != miss_of.end()) {
        slot.miss = pending->second;
        slot.repeated = true;
      } else if ((slot.picture.rows = cache_->Find(image.key, /*outer_tiers=*/true)) == nullptr) {
        error = image.patches.empty()
                    ? base::MakeError(ErrorCode::kInvalidArgument, "a picture neither cached nor carrying its patches")
                    : tower_.Check({image.patches, image.vit_h, image.vit_w});
        if (!error.ok()) break;
        slot.miss = static_cast<int>(plan.misses.size());
        miss_of.emplace(image.key, slot.miss);
        plan.misses.push_back(&image);
      }
    }
  }
  return plan;
}

// Every picture of the jobs from the cache, the rest through tower runs of at most the pixel
// budget; a job that needs no run is answered first. Each job gets its pictures or its first
// error.
void ImageEncoder::EncodeJobs(std::vector<Job>& jobs) {
  Plan plan = PlanJobs(jobs);
  std::vector<std::vector<Slot>>& slots = plan.slots;
  std::vector<base::Status>& errors = plan.errors;
  const std::vector<const protocol::ImageInput*>& misses = plan.misses;
  const auto answer = [&](size_t j) {
    queued_ -= static_cast<int64_t>(jobs[j].images.size());
    if (!errors[j].ok()) return jobs[j].done(errors[j].error());
    std::vector<EncodedPicture> out;
    for (Slot& slot : slots[j]) out.push_back(std::move(slot.picture));
    jobs[j].done(std::move(out));
  };
  std::vector<bool> waits(jobs.size(), false);
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (const Slot& slot : slots[j]) waits[j] = waits[j] || (slot.miss >= 0 && errors[j].ok());
    if (!waits[j]) answer(j);
  }
  if (misses.empty()) return;
  base::Status failed;
  const std::vector<ImageRows> encoded = EncodeMisses(misses, &failed);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!waits[j]) continue;
    for (Slot& slot : slots[j]) {
      if (slot.miss < 0) continue;
      const ImageRows& rows = encoded[static_cast<size_t>(slot.miss)];
      if (!rows) {
        errors[j] = failed;
        break;
      }
      // A repeat reads the rows back from the cache (counted as a hit there), as a later request would.
      slot.picture.rows = slot.repeated ? cache_->Find(slot.picture.key, false) : rows;
      if (!slot.picture.rows) slot.picture.rows = rows;
      slot.picture.cached = slot.repeated;
    }
    answer(j);
  }
}

// The pictures through the tower in runs of at most the pixel budget (one larger picture runs
// alone); each goes into the cache with its share of its run's time (by rows). A run that fails
// leaves its pictures' rows null and says why in *failed.
std::vector<ImageRows> ImageEncoder::EncodeMisses(const std::vector<const protocol::ImageInput*>& misses,
                                                  base::Status* failed) {
  const int patch = model_.config().vision.patch_size;
  std::vector<ImageRows> out(misses.size());
  size_t first = 0;
  while (first < misses.size()) {
    size_t end = first;
    int64_t pixels = 0, rows = 0;
    std::vector<engine::PicturePatches> batch;
    for (; end < misses.size(); ++end) {
      const protocol::ImageInput& image = *misses[end];
      const int64_t more = int64_t{image.vit_h} * image.vit_w * patch * patch;
      if (end > first && pixels + more > batch_pixels_) break;
      pixels += more;
      rows += int64_t{image.vit_h} * image.vit_w;
      batch.push_back({image.patches, image.vit_h, image.vit_w});
    }
    const auto start = std::chrono::steady_clock::now();
    auto encoded = tower_.EncodeBatch(batch);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++batches_;
    if (!encoded.ok()) {
      *failed = encoded.error();
      first = end;
      continue;
    }
    for (size_t i = first; i < end; ++i) {
      out[i] = std::make_shared<const std::vector<float>>(std::move((*encoded)[i - first]));
      const double share = static_cast<double>(int64_t{misses[i]->vit_h} * misses[i]->vit_w) / static_cast<double>(rows);
      cache_->Insert(misses[i]->key, out[i], seconds * share);
    }
    first = end;
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
