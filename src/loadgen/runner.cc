// Benchmark driver on one Asio event loop with C++20 coroutines (see runner.h). All state lives
// on the loop's thread, so nothing here needs a lock.
#include "loadgen/runner.h"

#include "net/http_client.h"  // first among the Boost users (see its <utility> note)

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <deque>
#include <exception>
#include <functional>
#include <tuple>

#include "loadgen/rng.h"

namespace flashserve::loadgen {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

asio::awaitable<void> Sleep(double seconds) {
  asio::steady_timer timer(co_await asio::this_coro::executor,
                           std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds)));
  error_code ec;
  co_await timer.async_wait(Await(ec));
}

// A counting semaphore for coroutines on one thread. Release hands the slot straight to the
// oldest waiter, so waiters are served in arrival order.
class Slots {
 public:
  explicit Slots(int32_t n) : free_(n) {}
  asio::awaitable<void> Acquire() {
    if (free_ > 0) {
      --free_;
      co_return;
    }
    auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor,
                                                      asio::steady_timer::time_point::max());
    waiters_.push_back(timer);
    error_code ec;
    co_await timer->async_wait(Await(ec));  // cancelled by Release: the slot is ours
  }
  void Release() {
    if (waiters_.empty()) {
      ++free_;
      return;
    }
    waiters_.front()->cancel();
    waiters_.pop_front();
  }

 private:
  int32_t free_;
  std::deque<std::shared_ptr<asio::steady_timer>> waiters_;
};

bool IsTrace(const Dataset& dataset) { return dataset.config().kind == DatasetKind::kTrace; }

// Jobs in flight at most: max_concurrency for Poisson runs, concurrency for trace replay.
int32_t InFlightCap(const BenchConfig& config, const Dataset& dataset) {
  const int32_t cap = IsTrace(dataset) ? config.concurrency : config.max_concurrency;
  return cap > 0 ? cap : INT32_MAX;
}

void FillFromStream(const net::HttpOutcome& out, const StreamAccumulator& acc, double start_s, double end_s,
                    RequestRecord* r) {
  r->outcome = Outcome::kError;
  r->http_status = out.status;
  if (out.status != 0 && out.status != 200) {
    r->error = "HTTP " + std::to_string(out.status) + ": " + ErrorBodyMessage(out.body);
  } else if (out.transport) {
    r->error = out.transport->message();
  } else if (acc.error()) {
    r->error = "error in stream: " + *acc.error();
  } else if (!acc.first_token_s()) {
    r->error = "stream ended without output";
  } else {
    r->outcome = Outcome::kOk;
    r->ttft_s = *acc.first_token_s() - start_s;
    r->e2e_s = end_s - start_s;
    r->itl_s = acc.itl_s();
    r->completion_tokens = acc.num_token_chunks();
    if (acc.usage()) {
      r->has_usage = true;
      r->prompt_tokens = acc.usage()->prompt_tokens;
      r->cached_tokens = acc.usage()->cached_tokens;
      r->completion_tokens = acc.usage()->completion_tokens;
    }
  }
}

class Run {
 public:
  Run(const BenchConfig& config, const Dataset& dataset, net::HttpClient& client, ProgressFn progress)
      : config_(config), dataset_(dataset), client_(client), progress_(std::move(progress)),
        slots_(InFlightCap(config, dataset)) {}

  asio::awaitable<void> Main(asio::any_io_executor executor);

  std::string model;
  std::optional<base::Error> failure;
  std::exception_ptr exception;
  std::vector<RequestRecord> records;
  int64_t num_skipped = 0;
  double duration_s = 0.0;

 private:
  double Now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  bool PastDeadline() const { return config_.duration_s > 0 && Now() >= config_.duration_s; }
  bool JobsLeft(int64_t idx) const { return dataset_.num_jobs() == 0 || idx < dataset_.num_jobs(); }
  auto OnDone() {
    return [this](std::exception_ptr e) {
      if (e && !exception) exception = e;
    };
  }

  asio::awaitable<void> ResolveModel();
  asio::awaitable<void> ClosedLoopWorker();
  // Starts job idx at next_arrival(idx) seconds (non-decreasing) while a slot is free.
  asio::awaitable<void> Dispatch(asio::any_io_executor executor, std::function<double(int64_t)> next_arrival);
  asio::awaitable<void> RunSlottedJob(int64_t job_idx);
  asio::awaitable<void> RunJob(int64_t job_idx);
  asio::awaitable<RequestRecord> RunRequest(int64_t job_idx, int32_t turn_idx, std::string body, std::string session,
                                            std::string* reply);

  const BenchConfig& config_;
  const Dataset& dataset_;
  net::HttpClient& client_;
  ProgressFn progress_;
  Slots slots_;
  std::chrono::steady_clock::time_point start_;
  int64_t next_job_ = 0;
};

asio::awaitable<void> Run::Main(asio::any_io_executor executor) {
  model = config_.model;
  if (model.empty()) co_await ResolveModel();
  if (failure) co_return;
  start_ = std::chrono::steady_clock::now();
  if (IsTrace(dataset_)) {
    const double scale = config_.time_scale;
    co_spawn(executor, Dispatch(executor, [this, scale](int64_t idx) { return *dataset_.ArrivalS(idx) * scale; }),
             OnDone());
  } else if (config_.request_rate > 0) {
    auto arrivals = std::make_shared<PoissonArrivals>(config_.request_rate, config_.seed);
    co_spawn(executor, Dispatch(executor, [arrivals](int64_t) { return arrivals->Next(); }), OnDone());
  } else {
    for (int32_t i = 0; i < std::max(config_.concurrency, 1); ++i) co_spawn(executor, ClosedLoopWorker(), OnDone());
  }
}

asio::awaitable<void> Run::ResolveModel() {
  net::HttpOutcome out = co_await client_.Get("/v1/models");
  std::string why;
  if (out.transport) {
    why = out.transport->message();
  } else if (out.status != 200) {
    why = "HTTP " + std::to_string(out.status);
  } else {
    auto j = nlohmann::json::parse(out.body, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
      model = j["data"][0]["id"].get<std::string>();
      co_return;
    }
    why = "no model listed";
  }
  failure = base::MakeError(base::ErrorCode::kUnavailable, "GET /v1/models: " + why + " (pass --model)");
}

asio::awaitable<void> Run::ClosedLoopWorker() {
  while (!PastDeadline() && JobsLeft(next_job_)) co_await RunJob(next_job_++);
}

asio::awaitable<void> Run::Dispatch(asio::any_io_executor executor, std::function<double(int64_t)> next_arrival) {
  for (int64_t idx = 0; JobsLeft(idx); ++idx) {
    double at = next_arrival(idx);
    if (config_.duration_s > 0 && at >= config_.duration_s) break;
    if (at > Now()) co_await Sleep(at - Now());
    co_await slots_.Acquire();
    if (PastDeadline()) {
      slots_.Release();
      break;
    }
    co_spawn(executor, RunSlottedJob(idx), OnDone());
  }
}

asio::awaitable<void> Run::RunSlottedJob(int64_t job_idx) {
  co_await RunJob(job_idx);
  slots_.Release();
}

asio::awaitable<void> Run::RunJob(int64_t job_idx) {
  Job job = dataset_.Make(job_idx);
  std::vector<std::string> replies;
  int32_t num_turns = static_cast<int32_t>(job.turns.size());
  for (int32_t t = 0; t < num_turns; ++t) {
    if (PastDeadline()) {
      num_skipped += num_turns - t;
      break;
    }
    const Turn& turn = job.turns[t];
    SamplingParams params{model, turn.max_tokens, config_.temperature, config_.sampling_seed,
                          config_.ignore_eos || turn.ignore_eos};
    std::string body = turn.prompt_ids.empty() ? BuildRequestBody(config_.api, params, TurnMessages(job, t, replies))
                                               : BuildTokenPromptBody(params, turn.prompt_ids);
    std::string reply;
    RequestRecord r = co_await RunRequest(job_idx, t, std::move(body), job.session, &reply);
    bool ok = r.outcome == Outcome::kOk;
    if (progress_) progress_(r);
    records.push_back(std::move(r));
    duration_s = std::max(duration_s, Now());
    if (!ok) {
      num_skipped += num_turns - t - 1;
      break;
    }
    replies.push_back(std::move(reply));
  }
}

asio::awaitable<RequestRecord> Run::RunRequest(int64_t job_idx, int32_t turn_idx, std::string body,
                                               std::string session, std::string* reply) {
  RequestRecord r;
  r.job_idx = job_idx;
  r.turn_idx = turn_idx;
  r.start_s = Now();
  for (int32_t attempt = 0;; ++attempt) {
    StreamAccumulator acc;
    net::RequestExtras extras;
    if (!session.empty()) extras.headers.emplace_back("x-session-id", session);
    net::HttpOutcome out = co_await client_.Post(std::string(ApiPath(config_.api)), body,
                                                 [&](std::string_view piece) { acc.OnBytes(piece, Now()); },
                                                 std::move(extras));
    double end_s = Now();
    if (out.status == 429) {
      ++r.num_429;
      if (config_.honor_retry_after && attempt < config_.max_retries && !PastDeadline()) {
        co_await Sleep(std::min(out.retry_after_s.value_or(1.0), config_.timeout_s));
        continue;
      }
      r.outcome = Outcome::kRejected;
      r.http_status = 429;
      r.error = "HTTP 429: " + ErrorBodyMessage(out.body);
      co_return r;
    }
    FillFromStream(out, acc, r.start_s, end_s, &r);
    *reply = acc.text();
    co_return r;
  }
}
}  // namespace

base::Status BenchConfig::Validate() const {
  auto bad = [](const std::string& why) { return base::MakeError(base::ErrorCode::kInvalidArgument, why); };
  if (concurrency < 0) return bad("concurrency must be >= 0");
  if (std::isnan(request_rate) || request_rate < 0) return bad("request-rate must be > 0");
  if (concurrency > 0 && request_rate > 0) return bad("set either concurrency or request-rate, not both");
  if (max_concurrency < 0) return bad("max-concurrency must be >= 0");
  if (max_concurrency > 0 && request_rate == 0) return bad("max-concurrency applies to request-rate runs (use concurrency)");
  if (!(duration_s >= 0) || std::isinf(duration_s)) return bad("duration must be a finite number of seconds >= 0");
  if (max_retries < 0) return bad("max-retries must be >= 0");
  if (!(timeout_s > 0) || std::isinf(timeout_s)) return bad("timeout must be > 0 seconds");
  if (!(temperature >= 0)) return bad("temperature must be >= 0");
  if (!(time_scale >= 0) || std::isinf(time_scale)) return bad("time-scale must be a finite number >= 0");
  return net::ParseBaseUrl(base_url).status();
}

namespace {

// flashserve_encode_seconds_total and the encoder-cache counters from a /metrics page.
struct VisionCounters {
  bool found = false;
  double seconds = 0, misses = 0, hits = 0;
};

VisionCounters ParseVisionCounters(const std::string& page) {
  VisionCounters v;
  const auto value = [&](std::string_view name, double* out) {
    const size_t at = page.find("\n" + std::string(name) + " ");
    if (at == std::string::npos) return false;
    *out = std::strtod(page.c_str() + at + name.size() + 2, nullptr);
    return true;
  };
  v.found = value("flashserve_encode_seconds_total", &v.seconds) &&
            value("flashserve_encoder_cache_misses_total", &v.misses) &&
            value("flashserve_encoder_cache_hits_total", &v.hits);
  return v;
}

// A coroutine of its own (not a capturing lambda: its captures would not outlive co_spawn).
asio::awaitable<void> FetchVision(net::HttpClient* client, VisionCounters* out) {
  net::HttpOutcome page = co_await client->Get("/metrics");
  if (!page.transport && page.status == 200) *out = ParseVisionCounters(page.body);
}

VisionCounters ScrapeVision(asio::io_context& io, net::HttpClient& client) {
  VisionCounters v;
  io.restart();  // after an earlier run() returned
  co_spawn(io, FetchVision(&client, &v), asio::detached);
  io.run();
  io.restart();  // for the run() that follows
  return v;
}

}  // namespace

base::Result<RunResult> RunBenchmark(const BenchConfig& config, const Dataset& dataset, ProgressFn progress) {
  FS_RETURN_IF_ERROR(config.Validate());
  if (dataset.num_jobs() == 0 && config.duration_s <= 0)
    return base::MakeError(base::ErrorCode::kInvalidArgument, "an unlimited number of requests needs a duration");
  if (IsTrace(dataset) && config.api != ApiKind::kCompletions)
    return base::MakeError(base::ErrorCode::kInvalidArgument, "trace replay sends token ids: use the completions endpoint");
  if (IsTrace(dataset) && config.request_rate > 0)
    return base::MakeError(base::ErrorCode::kInvalidArgument, "a trace sets its own arrival times (no request-rate)");
  FS_ASSIGN_OR_RETURN(net::Endpoint endpoint, net::ParseBaseUrl(config.base_url));
  asio::io_context io;
  net::HttpClient client(io.get_executor(), endpoint, config.api_key, config.timeout_s);
  Run run(config, dataset, client, std::move(progress));
  const bool pictures = dataset.config().turn_image_width > 0;
  if (pictures && config.api != ApiKind::kChat)
    return base::MakeError(base::ErrorCode::kInvalidArgument, "pictures need the chat endpoint");
  const VisionCounters before = pictures ? ScrapeVision(io, client) : VisionCounters{};
  try {
    co_spawn(io, run.Main(io.get_executor()), [&run](std::exception_ptr e) {
      if (e && !run.exception) run.exception = e;
    });
    io.run();
    if (run.exception) std::rethrow_exception(run.exception);
  } catch (const std::exception& e) {
    return base::MakeError(base::ErrorCode::kInternal, std::string("benchmark loop: ") + e.what());
  }
  if (run.failure) return *run.failure;
  RunResult result;
  result.model = run.model;
  result.records = std::move(run.records);
  std::sort(result.records.begin(), result.records.end(), [](const RequestRecord& a, const RequestRecord& b) {
    return std::tie(a.job_idx, a.turn_idx) < std::tie(b.job_idx, b.turn_idx);
  });
  result.duration_s = run.duration_s;
  result.num_skipped = run.num_skipped;
  result.num_connections = client.num_connections_opened();
  if (pictures) {
    const VisionCounters after = ScrapeVision(io, client);
    result.vision.reported = before.found && after.found;
    result.vision.encoded = static_cast<int64_t>(after.misses - before.misses);
    result.vision.cache_hits = static_cast<int64_t>(after.hits - before.hits);
    result.vision.encode_seconds = after.seconds - before.seconds;
  }
  return result;
}

}  // namespace flashserve::loadgen
