// The engine thread: request intake, the step loop and per-choice bookkeeping (serve/server.h).
#include "serve/server.h"

#include "serve/server_internal.h"

#include <algorithm>
#include <limits>
#include <random>

#include "base/clock.h"
#include "base/log.h"
#include "sampler/sampler.h"

namespace flashserve::serve {

using base::Error;
using base::ErrorCode;
using protocol::FinishReason;

namespace {
// The server enforces the request-queue limit at Submit (exactly, under its lock); the
// scheduler's own waiting queue also holds preempted sequences and must never refuse them.
sched::SchedConfig UnboundedQueue(sched::SchedConfig c) {
  c.max_waiting = int64_t{1} << 40;
  return c;
}
}  // namespace

base::Status ServerConfig::Validate() const {
  FS_RETURN_IF_ERROR(sched.Validate());
  if (prefix_cache_bytes < 0) return Error(ErrorCode::kInvalidArgument, "prefix cache size must be >= 0");
  if (max_choices < 1) return Error(ErrorCode::kInvalidArgument, "max choices must be >= 1");
  if (max_context < 0) return Error(ErrorCode::kInvalidArgument, "max context must be >= 0");
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

Server::Server(const engine::Model& model, const engine::EngineOptions& engine_options, const ServerConfig& config)
    : Server(model, engine_options, config, MemoryStore(model, engine_options, config.prefix_cache_bytes)) {}

Server::Server(const engine::Model& model, const engine::EngineOptions& engine_options, const ServerConfig& config,
               std::unique_ptr<kvstore::KvStore> store)
    : model_(model),
      engine_options_(engine_options),
      config_(config),
      engine_(model, engine_options),
      sched_(UnboundedQueue(config.sched),
             [&model](int64_t p) { return engine::EstimateStateBytes(model.config(), model.plan(), false, p); }) {
  if (config_.max_context <= 0 || config_.max_context > model.config().max_position)
    config_.max_context = model.config().max_position;
  store_ = std::move(store);
  fingerprint_ = ModelFingerprint(model, engine_options);
  if (store_) prefix_ = std::make_unique<PrefixStore>(model, fingerprint_, store_.get());
  stats_.state_pool_capacity = config_.sched.state_pool_bytes;
  busy_last_seconds_ = base::MonotonicSeconds();
}

Server::~Server() { Stop(); }

void Server::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Server::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  DrainInbound(false);
  std::vector<std::string> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (const auto& id : ids) CancelNow(id, FinishReason::kCancelled, "server shutting down");
  if (store_) store_->Close();  // flushes queued write-throughs
}

ModelInfo Server::Info() const {
  const model::ModelConfig& c = model_.config();
  return ModelInfo{config_.model_name, c.vocab_size, config_.max_context, static_cast<int32_t>(c.eos_token_id),
                   static_cast<int32_t>(c.bos_token_id), fingerprint_};
}

protocol::KvEventPage Server::KvEvents(uint64_t after, size_t max) const {
  return store_ ? store_->Events(after, max) : protocol::KvEventPage{};
}

protocol::KvSnapshot Server::KvSnapshot() const { return store_ ? store_->Snapshot() : protocol::KvSnapshot{}; }

std::vector<CacheObject> Server::ExportPrefix(const std::string& ns, std::span<const int32_t> prompt,
                                             int64_t from_block, int64_t upto_tokens) const {
  if (!prefix_) return {};
  const int64_t limit = upto_tokens >= 0 ? upto_tokens : static_cast<int64_t>(prompt.size()) - 1;
  const std::vector<kv::BlockHash> hashes = prefix_->Hashes(ns, prompt, limit);
  const size_t lowest = upto_tokens >= 0 ? hashes.size() : 1;  // a given end, or the longest held
  for (size_t k = hashes.size(); k >= lowest && k > 0; --k) {
    kvstore::Payload boundary =
        store_->GetMemory({kvstore::ObjectKind::kBoundary, hashes[k - 1]}, /*count_miss=*/false);
    if (!boundary) continue;
    std::vector<CacheObject> out;
    for (size_t b = static_cast<size_t>(std::max<int64_t>(from_block, 0)); b < k; ++b) {
      kvstore::Payload block = store_->GetMemory({kvstore::ObjectKind::kBlock, hashes[b]});
      if (!block) return {};
      out.push_back({kvstore::ObjectKind::kBlock, hashes[b], kv::kBlockTokens, std::move(block)});
    }
    out.push_back({kvstore::ObjectKind::kBoundary, hashes[k - 1], static_cast<int64_t>(k) * kv::kBlockTokens,
                   std::move(boundary)});
    return out;
  }
  return {};
}

void Server::ImportObject(const CacheObject& object) {
  if (store_ && object.payload) store_->Put({object.kind, object.hash}, object.payload, object.tokens, "");
}

ServiceStats Server::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

base::Status Server::ValidateRequest(const protocol::GenerateRequest& r) const {
  const model::ModelConfig& c = model_.config();
  if (r.id.empty()) return Error(ErrorCode::kInvalidArgument, "request id is empty");
  if (r.prompt.empty()) return Error(ErrorCode::kInvalidArgument, "the prompt is empty");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= c.vocab_size) return Error(ErrorCode::kInvalidArgument, "prompt token " + std::to_string(t) + " is outside the vocabulary");
  if (r.n < 1 || r.n > config_.max_choices)
    return Error(ErrorCode::kInvalidArgument, "n must be between 1 and " + std::to_string(config_.max_choices));
  if (r.max_tokens < 1) return Error(ErrorCode::kInvalidArgument, "max_tokens must be >= 1");
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
  if (total > config_.max_context)
    return Error(ErrorCode::kContextOverflow, "the prompt (" + std::to_string(r.prompt.size()) + " tokens) plus max_tokens (" +
                                                  std::to_string(r.max_tokens) + ") exceeds the context of " +
                                                  std::to_string(config_.max_context) + " tokens");
  if (engine::EstimateStateBytes(c, model_.plan(), false, total) > config_.sched.state_pool_bytes)
    return Error(ErrorCode::kContextOverflow, "the request needs more sequence-state memory than the server's pool");
  return sampler::ValidateSamplingParams(r.sampling, c.vocab_size);
}

base::Status Server::Submit(protocol::GenerateRequest request, EventSink sink) {
  FS_RETURN_IF_ERROR(ValidateRequest(request));
  auto r = std::make_shared<Request>();
  r->req = std::move(request);
  r->sink = std::move(sink);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Error(ErrorCode::kUnavailable, "the server is shutting down");
    if (queued_requests_ >= config_.sched.max_waiting) {
      ++stats_.requests_rejected_total;
      return Error(ErrorCode::kResourceExhausted, "too many queued requests (" +
                                                      std::to_string(config_.sched.max_waiting) + "); retry later");
    }
    ++queued_requests_;
    Command c;
    c.id = r->req.id;
    c.request = std::move(r);
    inbound_.push_back(std::move(c));
  }
  wake_.notify_one();
  return base::Status::Ok();
}

void Server::Cancel(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Command c;
    c.cancel = true;
    c.id = request_id;
    inbound_.push_back(std::move(c));
  }
  wake_.notify_one();
}

void Server::DrainInbound(bool block) {
  std::vector<Command> commands;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (block) wake_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_ || !inbound_.empty(); });
    commands.swap(inbound_);
  }
  for (Command& c : commands) {
    if (c.cancel) {
      CancelNow(c.id, FinishReason::kCancelled, "");
    } else if (c.fetched) {
      auto it = requests_.find(c.id);
      std::vector<kvstore::ObjectKey>& pinned = c.request->pinned;  // the L1 part, pinned at StartFetch
      pinned.insert(pinned.end(), c.pinned.begin(), c.pinned.end());
      if (it == requests_.end() || it->second != c.request) {
        ReleasePins(*c.request);  // cancelled while fetching
      } else {
        Enqueue(std::move(c.request));
      }
    } else {
      Admit(std::move(c.request));
    }
  }
}

void Server::Admit(std::shared_ptr<Request> request) {
  if (requests_.count(request->req.id)) {
    MarkStarted(*request);
    protocol::GenerateEvent e;
    e.finish = FinishReason::kError;
    e.error = "duplicate request id";
    e.request_done = true;
    request->sink(e);
    return;
  }
  if (!request->req.sampling.has_seed) {
    static std::mt19937_64 rng(std::random_device{}());
    request->req.sampling.seed = rng();
  }
  request->usage.prompt_tokens = static_cast<int64_t>(request->req.prompt.size());
  if (request->req.prefill_cached_tokens >= 0) {  // disaggregated: the prefill worker's count is authoritative
    request->cached_counted = true;
    request->usage.cached_tokens = request->usage.cached_prefill =
        std::min(request->req.prefill_cached_tokens, request->usage.prompt_tokens);
  }
  requests_[request->req.id] = request;
  if (!StartFetch(request)) Enqueue(std::move(request));
}

// Fetch-or-recompute: when disk or the shared tier hold a longer prefix than memory and
// fetching it is predicted faster than recomputing it, fetch asynchronously and admit the
// request when the objects are in memory (pinned until restored).
bool Server::StartFetch(const std::shared_ptr<Request>& request) {
  if (!prefix_) return false;
  const auto& prompt = request->req.prompt;
  FetchPlan plan = prefix_->PlanFetch(request->req.cache_namespace, prompt, static_cast<int64_t>(prompt.size()) - 1);
  request->block_tiers = plan.block_tiers;
  if (plan.total_blocks <= plan.memory_blocks || plan.keys.empty()) return false;
  const int64_t blocks = plan.total_blocks - plan.memory_blocks;
  const double fetch_s = store_->PredictFetchSeconds(plan.slowest, prefix_->EstimateFetchBytes(blocks));
  const double recompute_s = prefill_seconds_per_token_ > 0
                                 ? static_cast<double>(blocks * kv::kBlockTokens) * prefill_seconds_per_token_
                                 : std::numeric_limits<double>::infinity();
  if (fetch_s >= recompute_s) return false;
  // The part already in L1 stays there until the restore: inserting the fetched objects must
  // not evict the head of the very prefix they complete.
  for (const kvstore::ObjectKey& key : plan.resident) {
    if (store_->Pin(key)) request->pinned.push_back(key);
  }
  std::vector<kvstore::ObjectKey> keys = plan.keys;
  store_->Fetch(
      keys,
      [this, request, keys](std::vector<bool> present) {
        // I/O thread: hand the result to the engine thread.
        {
          std::lock_guard<std::mutex> lock(mu_);
          Command c;
          c.fetched = true;
          c.id = request->req.id;
          c.request = request;
          for (size_t i = 0; i < keys.size(); ++i)
            if (i < present.size() && present[i]) c.pinned.push_back(keys[i]);
          inbound_.push_back(std::move(c));
        }
        wake_.notify_one();
      },
      /*pin=*/true);
  return true;
}

void Server::Enqueue(std::shared_ptr<Request> request) {
  auto choice = std::make_unique<Choice>();
  choice->seq_id = next_seq_id_++;
  choice->request = request;
  choice->params = request->req.sampling;
  choice->history.SetPrompt(request->req.prompt);
  sched::Sequence seq;
  seq.id = choice->seq_id;
  seq.tokens = request->req.prompt;
  seq.num_prompt = static_cast<int64_t>(seq.tokens.size());
  base::Status s = sched_.Add(std::move(seq));
  if (!s.ok()) {
    MarkStarted(*request);
    ReleasePins(*request);
    requests_.erase(request->req.id);
    protocol::GenerateEvent e;
    e.finish = FinishReason::kError;
    e.error = s.error().message();
    e.request_done = true;
    request->sink(e);
    return;
  }
  request->open_choices = 1;
  request->forks_pending = request->req.n - 1;
  request->seq_ids.push_back(choice->seq_id);
  choices_[choice->seq_id] = std::move(choice);
}

void Server::ReleasePins(Request& request) {
  for (const kvstore::ObjectKey& key : request.pinned) store_->Unpin(key);
  request.pinned.clear();
}

void Server::MarkStarted(Request& request) {
  if (request.started) return;
  request.started = true;
  std::lock_guard<std::mutex> lock(mu_);
  --queued_requests_;
}

}  // namespace flashserve::serve
