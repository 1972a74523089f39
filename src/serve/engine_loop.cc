// The engine loop's construction, its thread, the intake queue and the thread-safe queries
// (serve/engine_loop.h). Admission is in admission.cc, one step in step.cc.
#include "serve/engine_loop.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"

namespace flashserve::serve {

using base::Error;
using base::ErrorCode;
using protocol::FinishReason;

base::Status LoopConfig::Validate() const {
  FS_RETURN_IF_ERROR(sched.Validate());
  if (prefix_cache_bytes < 0) return Error(ErrorCode::kInvalidArgument, "prefix cache size must be >= 0");
  if (max_choices < 1) return Error(ErrorCode::kInvalidArgument, "max choices must be >= 1");
  if (max_context < 0) return Error(ErrorCode::kInvalidArgument, "max context must be >= 0");
  if (encode_batch_pixels < 0) return Error(ErrorCode::kInvalidArgument, "the encode batch's pixel budget must be >= 0");
  if (speculative.num_draft_tokens < 1 || speculative.num_draft_tokens > 16)
    return Error(ErrorCode::kInvalidArgument, "the number of draft tokens must be in [1, 16]");
  return base::Status::Ok();
}

namespace {
const base::Clock& ProcessClock() {
  static const base::SystemClock clock;
  return clock;
}

std::unique_ptr<kvstore::KvStore> MemoryStore(const engine::Model& model, const engine::EngineOptions& options,
                                              int64_t bytes) {
  if (bytes <= 0) return nullptr;
  kvstore::StoreConfig cfg;
  cfg.fingerprint = ModelFingerprint(model, options);
  cfg.memory_bytes = bytes;
  cfg.io_threads = 1;
  auto store = kvstore::KvStore::Open(cfg, ProcessClock());
  FS_CHECK(store.ok(), "in-memory prefix cache: %s", store.error().ToString().c_str());
  return std::move(store).value();
}
}  // namespace

EngineLoop::EngineLoop(const engine::Model& model, const engine::EngineOptions& engine_options,
                       const LoopConfig& config)
    : EngineLoop(model, engine_options, config, MemoryStore(model, engine_options, config.prefix_cache_bytes)) {}

EngineLoop::EngineLoop(const engine::Model& model, const engine::EngineOptions& engine_options,
                       const LoopConfig& config, std::unique_ptr<kvstore::KvStore> store)
    : model_(model),
      engine_options_(engine_options),
      config_(config),
      engine_(model, engine_options),
      sched_(config.sched,
             [&model, drafter = config.speculative.drafter](int64_t p) {
               return engine::EstimateStateBytes(model.config(), model.plan(), drafter, p);
             }),
      store_(std::move(store)),
      fingerprint_(ModelFingerprint(model, engine_options)),
      loop_stats_(base::MonotonicSeconds()),
      seeds_(std::random_device{}()) {
  // A vision model never samples its image placeholder: it would have no picture to embed.
  const int64_t image = model.config().image_token_id, vocab = model.config().vocab_size;
  if (model.config().vision.present() && image >= 0 && image < vocab) {
    no_image_mask_.assign(static_cast<size_t>((vocab + 31) / 32), ~0u);
    no_image_mask_[static_cast<size_t>(image) / 32] &= ~(1u << (image % 32));
  }
  if (config_.max_context <= 0 || config_.max_context > model.config().max_position)
    config_.max_context = model.config().max_position;
  if (store_) prefix_ = std::make_unique<PrefixStore>(model, fingerprint_, store_.get());
  encoder_cache_ = std::make_unique<EncoderCache>(model.config().hidden_size, config_.encoder_cache_bytes, store_.get(),
                                                  config_.image_ttl_class);
  image_encoder_ = std::make_unique<ImageEncoder>(model, std::max(1, engine_options.num_threads), encoder_cache_.get(),
                                                  config_.encode_batch_pixels);
  stats_.state_pool_capacity = config_.sched.state_pool_bytes;
  if (Speculates() && config_.speculative.adaptive && config_.speculative.profile) {
    step_profile_ = config_.speculative.profile;
  } else if (Speculates() && config_.speculative.adaptive) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t rows = std::min<int64_t>(config_.sched.max_step_tokens,
                                           int64_t{config_.sched.max_running} * (config_.speculative.num_draft_tokens + 1));
    step_profile_ = std::make_shared<const StepProfile>(StepProfile::Measure(engine_, rows, config_.sched.max_running));
    FS_LOG(kInfo, "serve: step time profiled up to {} rows in {:.2f} s ({:.1f} ms at 1 row, {:.1f} ms at {})", rows,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
           step_profile_->Seconds(1) * 1e3, step_profile_->Seconds(rows) * 1e3, rows);
  }
}

EngineLoop::~EngineLoop() { Stop(); }

void EngineLoop::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void EngineLoop::Stop() {
  image_encoder_->Stop();  // no callback Posts after this
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  DrainCommands(false);
  std::vector<std::string> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (const auto& id : ids) EndRequest(id, FinishReason::kCancelled, "server shutting down");
  if (store_) store_->Close();  // flushes queued write-throughs; fetches in flight report
  DrainCommands(false);         // the fetches' results: their pins are released
  retired_.clear();
}

void EngineLoop::Run() {
  while (!stop_) {
    const bool idle = sched_.num_running() == 0 && sched_.num_waiting() == 0;
    DrainCommands(idle);
    if (stop_) break;
    if (!StepOnce() && !idle) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(2), [&] { return stop_ || !inbound_.empty(); });
    }
  }
}

ModelInfo EngineLoop::Info() const {
  const model::ModelConfig& c = model_.config();
  return ModelInfo{config_.model_name, c.vocab_size, config_.max_context, static_cast<int32_t>(c.eos_token_id),
                   static_cast<int32_t>(c.bos_token_id), fingerprint_, c.hidden_size};
}

protocol::KvEventPage EngineLoop::KvEvents(uint64_t after, size_t max) const {
  return store_ ? store_->Events(after, max) : protocol::KvEventPage{};
}

protocol::KvSnapshot EngineLoop::KvSnapshot() const {
  return store_ ? store_->Snapshot() : protocol::KvSnapshot{};
}

std::vector<CacheObject> EngineLoop::ExportPrefix(const std::string& ns, std::span<const int32_t> prompt,
                                                 int64_t from_block, int64_t upto_tokens) const {
  return prefix_ ? prefix_->Export(prefix_->Seed(ns), prompt, from_block, upto_tokens) : std::vector<CacheObject>{};
}

void EngineLoop::ImportObject(const CacheObject& object) {
  if (object.kind == protocol::KvObjectKind::kImage) {
    base::Status imported = encoder_cache_->Import(object.hash, object.payload);
    if (!imported.ok()) FS_LOG(kWarning, "serve: a received picture was refused: {}", imported.error().message());
    return;
  }
  if (prefix_) prefix_->Import(object);
}

base::SharedBytes EngineLoop::ExportImage(const protocol::KvHash& key) const { return encoder_cache_->Export(key); }

void EngineLoop::EncodeImages(std::vector<protocol::ImageInput> images, EncodeDone done) {
  if (!model_.config().vision.present()) {
    done(base::MakeError(ErrorCode::kInvalidArgument, "the model has no vision tower"));
    return;
  }
  image_encoder_->Submit(std::move(images), std::move(done));
}

ServiceStats EngineLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// On a vision model the image placeholder id is only valid inside a picture's span (raw token
// prompts could carry it without one), and spans must lie in the prompt, in order.
base::Status EngineLoop::ValidateImages(const protocol::GenerateRequest& r) const {
  const model::ModelConfig& c = model_.config();
  if (!r.images.empty() && !c.vision.present())
    return Error(ErrorCode::kInvalidArgument, "the model has no vision tower for the request's images");
  if (!c.vision.present()) return base::Status::Ok();
  int64_t covered_until = 0;
  size_t next = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(r.prompt.size()); ++i) {
    if (next < r.images.size() && i == r.images[next].start) {
      covered_until = i + static_cast<int64_t>(r.images[next++].roles.size());
    }
    if (r.prompt[static_cast<size_t>(i)] == c.image_token_id && i >= covered_until)
      return Error(ErrorCode::kInvalidArgument, "prompt token " + std::to_string(i) +
                                                    " is the image placeholder without a picture");
  }
  if (next != r.images.size() || covered_until > static_cast<int64_t>(r.prompt.size()))
    return Error(ErrorCode::kInvalidArgument, "the request's image spans do not fit its prompt");
  return base::Status::Ok();
}

base::Status EngineLoop::ValidateRequest(const protocol::GenerateRequest& r) const {
  const model::ModelConfig& c = model_.config();
  if (r.id.empty()) return Error(ErrorCode::kInvalidArgument, "request id is empty");
  if (r.prompt.empty()) return Error(ErrorCode::kInvalidArgument, "the prompt is empty");
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= c.vocab_size)
      return Error(ErrorCode::kInvalidArgument, "prompt token " + std::to_string(t) + " is outside the vocabulary");
  }
  FS_RETURN_IF_ERROR(ValidateImages(r));
  if (r.n < 1 || r.n > config_.max_choices)
    return Error(ErrorCode::kInvalidArgument, "n must be between 1 and " + std::to_string(config_.max_choices));
  if (r.max_tokens < 1) return Error(ErrorCode::kInvalidArgument, "max_tokens must be >= 1");
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
  if (total > config_.max_context)
    return Error(ErrorCode::kContextOverflow, "the prompt (" + std::to_string(r.prompt.size()) +
                                                  " tokens) plus max_tokens (" + std::to_string(r.max_tokens) +
                                                  ") exceeds the context of " + std::to_string(config_.max_context) +
                                                  " tokens");
  if (engine::EstimateStateBytes(c, model_.plan(), DrafterStates(), total) > config_.sched.state_pool_bytes)
    return Error(ErrorCode::kContextOverflow, "the request needs more sequence-state memory than the server's pool");
  return sampler::ValidateSamplingParams(r.sampling, c.vocab_size);
}

base::Status EngineLoop::Submit(protocol::GenerateRequest request, EventSink sink) {
  FS_RETURN_IF_ERROR(ValidateRequest(request));
  auto r = std::make_shared<LoopRequest>();
  r->req = std::move(request);
  r->sink = std::move(sink);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Error(ErrorCode::kUnavailable, "the server is shutting down");
    if (queued_requests_ >= config_.sched.max_waiting) {
      ++stats_.requests_rejected_total;
      return Error(ErrorCode::kResourceExhausted,
                   "too many queued requests (" + std::to_string(config_.sched.max_waiting) + "); retry later");
    }
    ++queued_requests_;
    inbound_.push_back(SubmitCommand{std::move(r)});
  }
  wake_.notify_one();
  return base::Status::Ok();
}

void EngineLoop::Cancel(const std::string& request_id) { Post(CancelCommand{request_id}); }

void EngineLoop::Post(Command command) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbound_.push_back(std::move(command));
  }
  wake_.notify_one();
}

void EngineLoop::DrainCommands(bool block) {
  std::vector<Command> commands;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (block) wake_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_ || !inbound_.empty(); });
    commands.swap(inbound_);
  }
  for (Command& c : commands) std::visit([this](auto& command) { Apply(command); }, c);
}

void EngineLoop::Apply(CancelCommand& c) { EndRequest(c.id, FinishReason::kCancelled, ""); }

void EngineLoop::Apply(FetchedCommand& c) {
  LoopRequest& r = *c.request;
  r.fetching = false;
  r.pinned.insert(r.pinned.end(), c.pinned.begin(), c.pinned.end());  // besides the L1 part pinned at StartFetch
  auto it = requests_.find(r.req.id);
  if (it == requests_.end() || it->second != c.request) {
    ReleasePins(r);  // cancelled while fetching
    return;
  }
  Enqueue(c.request);
}

}  // namespace flashserve::serve
