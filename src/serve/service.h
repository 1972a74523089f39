// The serving loop as the HTTP layer sees it: submit an encoded request with a sink for its
// events, cancel it, read statistics. Implemented by serve::EngineLoop (the engine thread) and by
// test fakes. Submit/Cancel/Stats/Info are thread-safe; sinks are called on the engine thread
// and must return quickly (hand the event to the I/O thread, never block).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>
#include <string>

#include "base/result.h"
#include "base/shared_bytes.h"
#include "protocol/cluster.h"
#include "protocol/generate.h"

namespace flashserve::serve {

struct ModelInfo {
  std::string name;          // served model id, e.g. "deepseek-v4-flash"
  int64_t vocab_size = 0;
  int64_t max_context = 0;   // prompt + generated tokens per sequence
  int32_t eos_token_id = 1;
  int32_t bos_token_id = 0;
  std::string fingerprint;   // model fingerprint: seeds the prefix-cache block hashes
  int64_t hidden_size = 0;   // model width (columns of a picture's tower output)
};

// One KV-store tier (0 memory, 1 local disk, 2 shared) as seen by /metrics.
struct KvTierStats {
  int64_t objects = 0, bytes = 0, capacity = 0, hits = 0, misses = 0, bytes_read = 0, bytes_written = 0,
          evictions = 0, expirations = 0, corrupt = 0, gc_backlog = 0;
  bool writable = true;
  int64_t pinned = 0;  // L1 objects pinned by sequences (memory tier only)
};

struct ServiceStats {
  int64_t running = 0;              // sequences in the batch
  int64_t waiting = 0;              // admitted requests not yet running
  int64_t state_pool_bytes = 0;     // sequence-state memory in use
  int64_t state_pool_capacity = 0;  // configured budget
  int64_t prefix_cache_bytes = 0;
  int64_t prompt_tokens_total = 0;
  int64_t cached_prompt_tokens_total = 0;
  int64_t generated_tokens_total = 0;
  int64_t preemptions_total = 0;
  int64_t steps_total = 0;          // engine steps that ran work
  int64_t step_rows_total = 0;      // rows those steps fed the engine (verified drafts included)
  int64_t step_rows_max = 0;        // the most rows one step fed it (at most --max-step-tokens)
  int64_t requests_finished_total = 0;
  int64_t requests_rejected_total = 0;
  double finished_per_second = 0;          // requests finished, a 10 s decaying average
  int64_t queued_prefill_tokens = 0;       // prompt tokens admitted but not yet computed
  double prefill_tokens_per_second = 0;    // measured on prefill-heavy steps (0 = none yet)
  double busy_fraction = 0;                // share of the last minute or so spent on prefill (0..1)
  double engine_busy_seconds_total = 0;    // wall time the engine spent in steps (its utilization)
  KvTierStats kv_tiers[3];
  // The colocated encode stage (pictures through the vision tower).
  int64_t encoder_cache_hits = 0;    // pictures whose tower output was cached
  int64_t queued_images = 0;         // pictures waiting for or in the encode stage
  int64_t prompt_tokens_while_encoding = 0;  // prompt tokens computed while their request's pictures encoded
  int64_t encoder_store_hits = 0;    // of the hits, those read from the KV store (restart, other worker)
  int64_t encoder_imported = 0;      // tower outputs received from other workers
  int64_t encoder_cache_misses = 0;  // pictures encoded
  int64_t encode_batches = 0;        // tower runs (each encodes one or more of those pictures)
  int64_t encoder_cache_bytes = 0;
  double encode_seconds_total = 0;
  // Speculative decoding: draft tokens verified, those accepted, and both by draft position
  // (index k: the (k+1)-th draft of a step).
  int64_t speculative_drafted = 0;
  int64_t speculative_accepted = 0;
  std::vector<int64_t> speculative_drafted_at, speculative_accepted_at;
};

using EventSink = std::function<void(const protocol::GenerateEvent&)>;

// A picture's vision-tower output (aligner rows, [rows][hidden]) by its content key
// (vision::ContentKey), and whether it came from a cache rather than the tower.
using ImageKey = std::array<uint8_t, 32>;
using ImageRows = std::shared_ptr<const std::vector<float>>;
struct EncodedPicture {
  ImageKey key{};
  ImageRows rows;
  bool cached = false;
};

// One prefix-cache object moving between workers (disaggregated serving).
struct CacheObject {
  protocol::KvObjectKind kind = protocol::KvObjectKind::kBlock;
  protocol::KvHash hash{};
  int64_t tokens = 0;  // prompt tokens it covers: 128 (k + 1) for block k, 128 k for the boundary after block k-1
  base::SharedBytes payload;  // shared with the KV store and transfers, never copied
};

class Service {
 public:
  virtual ~Service() = default;
  // Queues a request. Errors: kInvalidArgument (bad parameters), kContextOverflow (prompt +
  // max_tokens beyond the context), kResourceExhausted (queue full: retry later).
  virtual base::Status Submit(protocol::GenerateRequest request, EventSink sink) = 0;
  // Stops a request (client gone, stop string seen). Its sink receives a final kCancelled
  // event within one engine step, unless it already finished. Unknown ids are ignored.
  virtual void Cancel(const std::string& request_id) = 0;
  virtual ServiceStats Stats() const = 0;
  virtual ModelInfo Info() const = 0;
  // KV events and index snapshots for the router (design.md section 6); thread-safe. The
  // defaults describe a service without a prefix cache.
  virtual bool HasKvEvents() const { return false; }
  virtual protocol::KvEventPage KvEvents(uint64_t after, size_t max) const {
    (void)after, (void)max;
    return {};
  }
  virtual protocol::KvSnapshot KvSnapshot() const { return {}; }
  // Disaggregated serving. ExportPrefix: the objects that resume `prompt` at `upto_tokens` (a
  // multiple of 128; -1 = as far as this worker's memory tier holds a boundary): blocks
  // from_block..k-1 and the boundary after block k-1; empty when that boundary or a block is
  // missing. ImportObject: stores a received object (memory tier, written through like a local
  // one). Both thread-safe; defaults do nothing.
  virtual std::vector<CacheObject> ExportPrefix(const std::string& cache_namespace, std::span<const int32_t> prompt,
                                                int64_t from_block = 0, int64_t upto_tokens = -1) const {
    (void)cache_namespace, (void)prompt, (void)from_block, (void)upto_tokens;
    return {};
  }
  virtual void ImportObject(const CacheObject& object) { (void)object; }
  // Pictures. ExportImage: a picture's tower output (an `image` object payload) from this
  // worker's encoder cache, null when absent. EncodeImages: the pictures' tower outputs (from
  // the encoder cache or the tower), done called once, on another thread. Thread-safe; the
  // defaults describe a service without a tower.
  virtual base::SharedBytes ExportImage(const protocol::KvHash& key) const {
    (void)key;
    return nullptr;
  }
  using EncodeDone = std::function<void(base::Result<std::vector<EncodedPicture>>)>;
  virtual void EncodeImages(std::vector<protocol::ImageInput> images, EncodeDone done) {
    (void)images;
    done(base::MakeError(base::ErrorCode::kInvalidArgument, "this server has no vision tower"));
  }
};

}  // namespace flashserve::serve
