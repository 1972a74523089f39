// The encode stage: a thread that turns pictures into vision-tower outputs (aligner rows), from
// the EncoderCache (memory, then the KV store's tiers) or through the tower on a pool of its
// own, so the engine thread never runs the tower or waits for the store's disk. Jobs queued
// together (several requests' pictures, up to a pixel budget) share one tower run. Submit from
// any thread; callbacks run on the encode thread. SpanInputs (any thread) assembles a prompt's
// span embeddings from the rows.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/model.h"
#include "engine/vision_tower.h"
#include "kv/block_hash.h"
#include "protocol/generate.h"
#include "serve/encoder_cache.h"

namespace flashserve::serve {

// A prompt's pictures as the engine takes them: the rows they fill and their embeddings.
struct EncodedImages {
  std::vector<kv::ImageExtent> extents;  // for the prefix cache
  std::vector<int32_t> rows;             // prompt positions, increasing
  std::vector<float> embeddings;         // [rows.size()][hidden]
  // Prompt ranges [first, second) computed whole with a bidirectional raw window (Vision-Exp's
  // START..END of each picture; none on V4.1), known from admission on.
  std::vector<std::pair<int64_t, int64_t>> bidirectional;
};

// The bidirectional ranges of the prompt's pictures on `model` (empty unless its span layout is
// Vision-Exp's).
std::vector<std::pair<int64_t, int64_t>> BidirectionalSpans(const engine::Model& model,
                                                             const std::vector<protocol::ImageInput>& images);

class ImageEncoder {
 public:
  using Done = std::function<void(base::Result<std::vector<EncodedPicture>>)>;

  // batch_pixels: the pixels (patches x patch area) one tower run may take from queued jobs'
  // pictures; a larger picture runs alone.
  ImageEncoder(const engine::Model& model, int threads, EncoderCache* cache, int64_t batch_pixels);
  ~ImageEncoder();  // Stop()
  ImageEncoder(const ImageEncoder&) = delete;
  ImageEncoder& operator=(const ImageEncoder&) = delete;

  // Queues the pictures (patches may be dropped after; only the keys and grids are read);
  // done gets one EncodedPicture per image, in order, or the first error.
  void Submit(std::vector<protocol::ImageInput> images, Done done);
  // Finishes the run in progress (its jobs' callbacks run); queued jobs are dropped without theirs.
  void Stop();
  // Pictures submitted and not yet answered (the load a router balances encode workers by).
  int64_t queued() const { return queued_.load(); }
  // Tower runs so far (pictures encoded / runs = pictures per run).
  int64_t batches() const { return batches_.load(); }

 private:
  struct Job {
    std::vector<protocol::ImageInput> images;
    Done done;
  };
  void Run();
  struct Slot {  // one picture of a taken job
    EncodedPicture picture;
    int miss = -1;          // index into Plan::misses when it waits for a run
    bool repeated = false;  // an earlier picture of these jobs carries the same key
  };
  struct Plan {
    std::vector<std::vector<Slot>> slots;  // per job
    std::vector<base::Status> errors;      // per job: its first error
    std::vector<const protocol::ImageInput*> misses;
  };
  std::vector<Job> TakeJobs();  // mu_ held: the front job and those that fit the budget with it
  Plan PlanJobs(const std::vector<Job>& jobs);
  void EncodeJobs(std::vector<Job>& jobs);
  std::vector<ImageRows> EncodeMisses(const std::vector<const protocol::ImageInput*>& misses, base::Status* failed);

  const engine::Model& model_;
  EncoderCache* cache_;
  const int64_t batch_pixels_;
  base::ThreadPool pool_;
  engine::VisionTower tower_;  // encode thread only
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::atomic<int64_t> queued_{0};
  std::atomic<int64_t> batches_{0};
  std::thread thread_;
};

// The prompt's span embeddings from its pictures' rows. kInvalidArgument when the spans do not
// fit the prompt or a span does not match its rows.
base::Result<EncodedImages> SpanInputs(const engine::Model& model, int64_t prompt_tokens,
                                       const std::vector<protocol::ImageInput>& images,
                                       const std::vector<EncodedPicture>& pictures);

}  // namespace flashserve::serve
