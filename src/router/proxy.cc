// Routing decisions and forwarding of generation requests (router/router_internal.h).
#include <strings.h>

#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cctype>
#include <cmath>
#include <optional>

#include "base/clock.h"
#include "base/log.h"
#include "base/wall_time.h"
#include "meter/limit_http.h"
#include "net/api_error.h"
#include "net/http_wire.h"
#include "net/sse_parser.h"
#include "protocol/image_parts.h"
#include "router/router_internal.h"

namespace flashserve::router {

namespace asio = boost::asio;
using Json = nlohmann::ordered_json;

namespace {

const std::vector<double> kDecisionBuckets = {1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 1e-2};
const std::vector<double> kTtftBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};

// The credentials as the worker expects them: the client's Authorization header, or its
// x-api-key turned into a Bearer token.
std::string Authorization(const net::HttpRequest& req) {
  std::string auth = req.Header("authorization");
  if (auth.empty() && !req.Header("x-api-key").empty()) auth = "Bearer " + req.Header("x-api-key");
  return auth;
}

// The session a request belongs to: the client's prompt_cache_key (OpenAI's routing key), a
// session header (x-session-id; Codex CLI's session-id), Anthropic's metadata.user_id (Claude
// Code puts its session there), the body's `user`, else the API key.
std::string AffinityKey(const net::HttpRequest& req, const Json& body, const meter::ApiKey* key) {
  if (auto it = body.find("prompt_cache_key"); it != body.end() && it->is_string() && !it->get_ref<const std::string&>().empty())
    return "cache:" + it->get<std::string>();
  if (std::string s = req.Header("x-session-id"); !s.empty()) return s;
  if (std::string s = req.Header("session-id"); !s.empty()) return s;
  if (auto m = body.find("metadata"); m != body.end() && m->is_object()) {
    auto user = m->find("user_id");
    if (user != m->end() && user->is_string() && !user->get_ref<const std::string&>().empty())
      return "user:" + user->get<std::string>();
  }
  if (auto it = body.find("user"); it != body.end() && it->is_string() && !it->get_ref<const std::string&>().empty())
    return "user:" + it->get<std::string>();
  return key != nullptr ? "key:" + key->id : "";
}

// The worker's own x-flashserve-* fields (dropped hosted tools, ...) and a tenant's rate-limit
// figures (x-ratelimit-*, anthropic-ratelimit-*) reach the client; the router names the worker
// itself. Where the router enforces the tenant's limits, its fleet-wide figures replace the
// worker's own.
net::HeaderList PassedOn(const net::HeaderList& worker_headers, const std::string& worker_url, const ProxyCall& call) {
  net::HeaderList out;
  // The router's figures win when it has some; a worker whose view of the tenant differs (one
  // refresh apart) keeps its own, which then explain its refusal.
  const bool fleet_limits = call.fleet_limits && !call.limit_headers.empty();
  for (const auto& [name, value] : worker_headers) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool ours = lower.starts_with("x-flashserve-") && lower != protocol::kWorkerHeader;
    const bool limits = lower.starts_with("x-ratelimit-") || lower.starts_with("anthropic-ratelimit-");
    if (ours || (limits && !fleet_limits)) out.emplace_back(lower, value);
  }
  if (fleet_limits) out.insert(out.end(), call.limit_headers.begin(), call.limit_headers.end());
  out.emplace_back(protocol::kWorkerHeader, worker_url);
  return out;
}

std::string HeaderValue(const net::HeaderList& headers, std::string_view name) {
  for (const auto& [key, value] : headers)
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) return value;
  return "";
}

void PostResponse(const std::shared_ptr<net::Exchange>& exchange, net::HttpResponse r) {
  exchange->Post([exchange, r = std::move(r)]() mutable { exchange->Respond(std::move(r)); });
}

}  // namespace

void RouterServer::Impl::StartProxy(std::shared_ptr<net::Exchange> exchange, PromptKind kind, Wire wire,
                                    bool generation) {
  const net::HttpRequest& req = exchange->request();
  const std::optional<meter::ApiKey> found = keys->enabled() ? keys->Find(req) : std::nullopt;  // the route table checked it
  const meter::ApiKey* key = found ? &*found : nullptr;
  auto call = std::make_shared<ProxyCall>();
  call->exchange = exchange;
  call->kind = kind;
  call->errors = wire == Wire::kAnthropic ? net::ErrorDialect::kAnthropic : net::ErrorDialect::kOpenAI;
  call->named_events = wire != Wire::kOpenAI;
  call->path = req.path;
  call->body = req.body;
  call->authorization = Authorization(req);
  call->start_s = base::MonotonicSeconds();
  if (key != nullptr) call->cache_namespace = meter::ApiKeyRing::Namespace(*key);
  Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object()) {
    auto stream = body.find("stream");
    call->stream = stream != body.end() && stream->is_boolean() && stream->get<bool>();
    call->affinity_key = AffinityKey(req, body, key);
    for (const std::string& source : protocol::ImageSources(body)) call->image_keys.push_back(AffinityHash(source));
    // Tokenization stays on the I/O threads; the format is the configured one or the workers'.
    const encoding::EncodingVersion format = config.encoding_version.value_or(
        pool.prompt_format().value_or(encoding::EncodingVersion::kV4));
    auto tokens = hasher.Tokens(kind, body, format);
    if (tokens.ok()) {
      call->tokens = std::move(tokens).value();
      call->hashable = true;
    }
  }
  if (generation && !AdmitTenant(*call, key)) return;
  exchange->SetCloseHandler([call] { call->gone = true; });
  // The tenant's concurrency place is held until the proxying (the whole stream) has ended.
  asio::co_spawn(ioc, Proxy(call), [call](const std::exception_ptr&) { call->limit_slot.reset(); });
}

bool RouterServer::Impl::AdmitTenant(ProxyCall& call, const meter::ApiKey* key) {
  if (config.limiter == nullptr || config.tenants == nullptr || key == nullptr || key->tenant.empty()) return true;
  const auto tenants = config.tenants->Tenants();
  const auto tenant = tenants->find(key->tenant);
  if (tenant == tenants->end()) return true;
  const int64_t now_s = base::UnixMicros() / 1'000'000;
  // The prompt as the router encoded it (unknown, 0, for bodies it does not tokenize).
  const auto prompt = static_cast<int64_t>(call.tokens.size());
  meter::LimitDecision d = config.limiter->Admit(key->tenant, tenant->second.limits, prompt, now_s);
  if (!d.allowed) {
    metrics.Counter("flashserve_router_tenant_limited_total", "Requests refused by a tenant's limits at the router",
                    {{"tenant", key->tenant}, {"limit", d.reason}}).Add();
    call.exchange->Respond(meter::LimitRefusal(d, prompt, call.errors, now_s));
    return false;
  }
  call.limit_headers = meter::RateLimitHeaders(d, call.errors, now_s);
  call.limit_slot = std::move(d.slot);
  call.fleet_limits = true;
  return true;
}

Decision RouterServer::Impl::Decide(const ProxyCall& call, Chooser& which, const LoadView& view) {
  const auto t0 = std::chrono::steady_clock::now();
  PromptBlocks blocks;
  if (call.hashable && !pool.fingerprint().empty())
    blocks = PromptHasher::Blocks(call.tokens, pool.fingerprint(), call.cache_namespace);
  const int64_t n = call.hashable ? static_cast<int64_t>(call.tokens.size()) : 0;
  Decision d = which.Route(blocks.blocks, n, call.affinity_key, index, view);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  metrics.Histo("flashserve_router_decision_seconds", "Routing decision time (hashing + index match + choice)",
                kDecisionBuckets).Observe(seconds);
  metrics.Counter("flashserve_router_decisions_total", "Routing decisions by policy and reason",
                  {{"policy", PolicyName(config.chooser.policy)}, {"reason", ReasonName(d.reason)}}).Add();
  if (d.outcome == Outcome::kRouted) {
    const std::string& url = pool.status(d.worker).url;
    metrics.Counter("flashserve_router_prompt_tokens_total", "Prompt tokens routed, per worker", {{"worker", url}})
        .Add(static_cast<double>(n));
    metrics.Counter("flashserve_router_predicted_cached_tokens_total",
                    "Prompt tokens the router expected the worker to have cached", {{"worker", url}})
        .Add(static_cast<double>(d.cached_tokens));
    metrics.Histo("flashserve_router_predicted_ttft_seconds", "Predicted time to first token of routed requests",
                  kTtftBuckets).Observe(d.predicted_ttft_s);
    loads.OnRouted(d.worker, std::max<int64_t>(0, n - d.cached_tokens));
  }
  return d;
}

void RouterServer::Impl::Reject(const ProxyCall& call, const Decision& d) {
  const bool none = d.reason == Reason::kNoHealthyWorker;
  const int retry_after_s = std::max(1, d.retry_after_s);
  // Saturation is a 429 for OpenAI's clients; Anthropic's call it overload (503, sent as 529).
  const bool overloaded = none || call.errors == net::ErrorDialect::kAnthropic;
  const net::ApiError e =
      overloaded ? net::Unavailable(none ? "no healthy worker is available; retry later"
                                         : "every worker is saturated; retry later", retry_after_s)
                 : net::RateLimited("every worker is saturated; retry later", retry_after_s);
  net::HttpResponse r = net::ErrorResponse(e, call.errors);
  metrics.Counter("flashserve_router_rejects_total", "Requests refused by the router (429/503/529)",
                  {{"status", std::to_string(r.status)}}).Add();
  PostResponse(call.exchange, std::move(r));
}

asio::awaitable<void> RouterServer::Impl::Proxy(std::shared_ptr<ProxyCall> call) {
  for (int attempt = 0; attempt < config.max_attempts && !call->gone; ++attempt) {
    std::string transfer_id, encode_transfers;
    const bool split = Disaggregated();
    const Decision d = split ? RouteDisaggregated(call, &transfer_id) : Decide(*call, chooser, GenerationView());
    if (d.outcome != Outcome::kRouted) co_return Reject(*call, d);
    if (!split) encode_transfers = StartEncoding(call, d.worker);  // split: the prefill half carries them
    if (attempt > 0) metrics.Counter("flashserve_router_retries_total", "Requests retried on another worker").Add();
    const ForwardResult result =
        co_await ForwardTo(call, d, attempt + 1 == config.max_attempts, transfer_id, encode_transfers);
    if (result == ForwardResult::kDone) co_return;
  }
  if (call->gone) co_return;
  PostResponse(call->exchange, net::ErrorResponse(net::Upstream(
                                   "no worker could serve the request (tried " + std::to_string(config.max_attempts) + ")"),
                                                  call->errors));
}

asio::awaitable<ForwardResult> RouterServer::Impl::ForwardTo(const std::shared_ptr<ProxyCall>& call, const Decision& d,
                                                            bool last_attempt, const std::string& transfer_id,
                                                            const std::string& encode_transfers) {
  const int w = d.worker;
  const std::string url = pool.status(w).url;
  bool started = false;
  std::string tail;  // the piece carrying [DONE], held until the worker's new KV events are read
  net::HeaderList head;  // the worker's response fields, read before the first body piece
  net::SseParser sse;
  std::vector<std::string> frames;
  net::BodyFn on_body;
  if (call->stream) {
    on_body = [&, call](std::string_view piece) {
      if (!started) {
        started = true;
        const double ttft = base::MonotonicSeconds() - call->start_s;
        metrics.Histo("flashserve_router_ttft_seconds", "Time to the first streamed byte through the router",
                      kTtftBuckets).Observe(ttft);
        metrics.Histo("flashserve_router_ttft_error_seconds", "|actual - predicted| time to first token",
                      kTtftBuckets).Observe(std::fabs(ttft - d.predicted_ttft_s));
        call->exchange->Post([ex = call->exchange, headers = PassedOn(head, url, *call)] {
          ex->StartStream(200, "text/event-stream", headers);
        });
      }
      if (!tail.empty() || piece.find("[DONE]") != std::string_view::npos) {
        tail.append(piece);
      } else {
        call->exchange->Post([ex = call->exchange, data = std::string(piece)]() mutable { ex->Write(std::move(data)); });
      }
      frames.clear();
      sse.Feed(piece, &frames);
      for (const std::string& f : frames) RecordUsage(w, f);
    };
  }
  net::RequestExtras extras;
  extras.on_head = [&head](int32_t, const net::HeaderList& fields) { head = fields; };
  extras.authorization = call->authorization;
  extras.cancelled = [call] { return call->gone.load(); };
  extras.whole_body = true;
  if (!transfer_id.empty()) extras.headers.emplace_back(protocol::kTransferHeader, transfer_id);
  if (!encode_transfers.empty()) extras.headers.emplace_back(protocol::kEncodeTransfersHeader, encode_transfers);
  metrics.Counter("flashserve_router_requests_total", "Requests forwarded, per worker", {{"worker", url}}).Add();
  net::HttpOutcome out = co_await pool.proxy_client(w).Post(call->path, call->body, on_body, std::move(extras));
  if (out.transport) {
    if (call->gone) co_return ForwardResult::kDone;
    if (!started) {
      FS_LOG(kWarning, "router: worker {} failed before the first byte ({}); retrying elsewhere", url,
             out.transport->message());
      pool.ReportFailure(w, out.transport->message());
      co_return ForwardResult::kRetry;
    }
    // Mid-stream: the client gets a clean error event and the end of the stream, never a hang.
    const net::ApiError e = net::Upstream("the worker serving this stream failed: " + out.transport->message());
    pool.ReportFailure(w, out.transport->message());
    // Named-event dialects (Messages, Responses) end with an `error` event; Chat with a data line.
    const std::string error = call->named_events ? net::SseEvent("error", net::ErrorBody(e, call->errors))
                                                 : net::SseData(net::ErrorBody(e));
    call->exchange->Post([ex = call->exchange, frame = tail + error]() mutable {
      ex->Write(std::move(frame));
      ex->EndStream();
    });
    co_return ForwardResult::kDone;
  }
  // A tenant's own limit is not a full worker: another worker must not be tried, nor this one
  // marked saturated.
  const bool tenant_limit = out.status == 429 && HeaderValue(out.headers, protocol::kLimitHeader) == "tenant";
  if ((out.status == 429 || out.status == 503 || out.status == net::kAnthropicOverloaded) && !last_attempt &&
      !tenant_limit) {
    pool.ReportSaturated(w);
    co_return ForwardResult::kRetry;
  }
  if (out.status == 200) co_await pool.Refresh(w);  // before the client can send its next turn
  if (started) {
    call->exchange->Post([ex = call->exchange, tail = std::move(tail)]() mutable {
      if (!tail.empty()) ex->Write(std::move(tail));
      ex->EndStream();
    });
    co_return ForwardResult::kDone;
  }
  if (out.status == 200) RecordUsage(w, out.body);
  net::HttpResponse r;
  r.status = out.status;
  r.body = std::move(out.body);
  r.headers = PassedOn(out.headers, url, *call);
  if (out.retry_after_s) r.headers.emplace_back("Retry-After", std::to_string(static_cast<int>(std::ceil(*out.retry_after_s))));
  PostResponse(call->exchange, std::move(r));
  co_return ForwardResult::kDone;
}

namespace {

// Prompt and cached tokens from a response body or stream frame in any dialect: Chat's
// prompt_tokens / prompt_cache_hit_tokens, Messages' input_tokens (uncached) +
// cache_read_input_tokens, Responses' input_tokens / input_tokens_details.cached_tokens.
bool UsageTokens(const Json& frame, int64_t* prompt, int64_t* cached) {
  const Json* usage = nullptr;
  if (auto u = frame.find("usage"); u != frame.end() && u->is_object()) usage = &*u;
  if (auto r = frame.find("response"); usage == nullptr && r != frame.end() && r->is_object()) {
    if (auto u = r->find("usage"); u != r->end() && u->is_object()) usage = &*u;
  }
  if (usage == nullptr) return false;
  auto number = [](const Json& j, const char* key) -> std::optional<int64_t> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  if (auto p = number(*usage, "prompt_tokens"), c = number(*usage, "prompt_cache_hit_tokens"); p && c) {
    *prompt = *p, *cached = *c;
    return true;
  }
  if (auto i = number(*usage, "input_tokens"), c = number(*usage, "cache_read_input_tokens"); i && c) {
    *prompt = *i + *c, *cached = *c;
    return true;
  }
  auto details = usage->find("input_tokens_details");
  if (details == usage->end() || !details->is_object()) return false;
  if (auto i = number(*usage, "input_tokens"), c = number(*details, "cached_tokens"); i && c) {
    *prompt = *i, *cached = *c;
    return true;
  }
  return false;
}

bool MayCarryUsage(std::string_view frame) {
  return frame.find("prompt_cache_hit_tokens") != std::string_view::npos ||
         frame.find("cache_read_input_tokens") != std::string_view::npos ||
         frame.find("\"cached_tokens\"") != std::string_view::npos;
}

}  // namespace

void RouterServer::Impl::RecordUsage(int worker, std::string_view json_text) {
  if (!MayCarryUsage(json_text)) return;
  Json j = Json::parse(json_text, nullptr, false);
  int64_t prompt = 0, cached = 0;
  if (!j.is_object() || !UsageTokens(j, &prompt, &cached)) return;
  const std::string& url = pool.status(worker).url;
  metrics.Counter("flashserve_router_cached_tokens_total", "Prompt tokens the worker reported as cache hits",
                  {{"worker", url}}).Add(static_cast<double>(cached));
  metrics.Counter("flashserve_router_reported_prompt_tokens_total", "Prompt tokens the worker reported",
                  {{"worker", url}}).Add(static_cast<double>(prompt));
}

}  // namespace flashserve::router
