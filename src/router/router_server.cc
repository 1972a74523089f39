// RouterServer set-up, dispatch and the small routes (router/router_server.h); forwarding is in
// proxy.cc.
#include "router/router_server.h"

#include <boost/asio/post.hpp>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/log.h"
#include "net/api_error.h"
#include "net/process_metrics.h"
#include "router/router_internal.h"

namespace flashserve::router {

namespace asio = boost::asio;
using Json = nlohmann::ordered_json;

base::Status RouterConfig::Validate() const {
  if (workers.empty()) return base::MakeError(base::ErrorCode::kInvalidArgument, "the router needs at least one --worker URL");
  for (const std::string& w : workers) {
    if (auto e = net::ParseBaseUrl(w); !e.ok())
      return base::MakeError(base::ErrorCode::kInvalidArgument, "--worker " + w + ": " + e.error().message());
  }
  if (max_attempts < 1) return base::MakeError(base::ErrorCode::kInvalidArgument, "max attempts must be >= 1");
  if (pool.poll_interval_s <= 0 || pool.control_timeout_s <= 0 || pool.proxy_timeout_s <= 0)
    return base::MakeError(base::ErrorCode::kInvalidArgument, "poll interval and timeouts must be positive");
  FS_RETURN_IF_ERROR(chooser.Validate());
  return http.Validate();
}

RouterServer::Impl::Impl(const RouterConfig& c, const tokenizer::Tokenizer& tok)
    : config(c),
      tokenizer(tok),
      hasher(tok, c.seal.get()),
      keys(c.key_ring ? c.key_ring : std::make_shared<meter::ApiKeyRing>(c.api_keys)),
      economics(c.economics),
      index(c.max_index_entries_per_worker),
      chooser(c.chooser),
      decode_chooser([&c] {
        ChooserConfig d = c.chooser;
        d.policy = Policy::kLeastLoad;
        return d;
      }()),
      pool(ioc, c.pool, &index, &loads, &metrics),
      admin(std::make_unique<meter::AdminRoutes>(c.admin_keys, c.meter_store)),
      routes([this](const std::string& route, int status, double seconds) {
        net::RecordExchange(metrics, "flashserve_router_", route, status, seconds);
      }) {
  AddRoutes();
}

namespace {

void Respond(const std::shared_ptr<net::Exchange>& exchange, int status, const Json& body) {
  net::HttpResponse r;
  r.status = status;
  r.body = body.dump();
  exchange->Post([exchange, r = std::move(r)]() mutable { exchange->Respond(std::move(r)); });
}

}  // namespace

// The same route table as a worker's (404, 405 + Allow, 401 without a key, per-route metrics);
// generation routes need a key when keys are configured, as on the workers.
void RouterServer::Impl::AddRoutes() {
  using Exchange = std::shared_ptr<net::Exchange>;
  for (const char* prefix : {"/v1", ""}) {  // DeepSeek's base URL has no /v1: both spellings
    const std::string p = prefix;
    routes.Add("POST", p + "/chat/completions", "/v1/chat/completions",
               [this](const Exchange& e) { StartProxy(e, PromptKind::kChat); }, /*needs_key=*/true);
    routes.Add("POST", p + "/completions", "/v1/completions",
               [this](const Exchange& e) { StartProxy(e, PromptKind::kCompletion); }, /*needs_key=*/true);
    routes.Add("GET", p + "/models", "/v1/models", [this](const Exchange& e) { AnswerModels(e); }, /*needs_key=*/true);
  }
  // Messages and Responses are tokenized as Chat is; token counting and the tokenize routes are
  // routed by session affinity and load. `generation` false: no tokens generated, so no tenant
  // limit counts it (as on the workers).
  auto proxied = [this](PromptKind kind, Impl::Wire wire, bool generation = true) {
    return [this, kind, wire, generation](const Exchange& e) { StartProxy(e, kind, wire, generation); };
  };
  for (const char* prefix : {"/v1", "/anthropic/v1", "/anthropic"}) {
    const std::string p = prefix;
    routes.Add("POST", p + "/messages", "/v1/messages", proxied(PromptKind::kMessages, Impl::Wire::kAnthropic), true,
               net::ErrorDialect::kAnthropic);
    routes.Add("POST", p + "/messages/count_tokens", "/v1/messages/count_tokens",
               proxied(PromptKind::kOpaque, Impl::Wire::kAnthropic, /*generation=*/false), true, net::ErrorDialect::kAnthropic);
  }
  routes.Add("POST", "/v1/responses", "/v1/responses", proxied(PromptKind::kResponses, Impl::Wire::kResponses), true);
  routes.Add("POST", "/responses", "/v1/responses", proxied(PromptKind::kResponses, Impl::Wire::kResponses), true);
  routes.Add("POST", "/tokenize", "/tokenize", proxied(PromptKind::kOpaque, Impl::Wire::kOpenAI, false), true);
  routes.Add("POST", "/detokenize", "/detokenize", proxied(PromptKind::kOpaque, Impl::Wire::kOpenAI, false), true);
  routes.Add("POST", "/beta/chat/completions", "/v1/chat/completions",
             [this](const Exchange& e) { StartProxy(e, PromptKind::kChat); }, true);
  routes.Add("POST", "/beta/completions", "/v1/completions",
             [this](const Exchange& e) { StartProxy(e, PromptKind::kCompletion); }, true);
  routes.Add("GET", "/health", "/health", [this](const Exchange& e) { AnswerHealth(e); });
  routes.Add("GET", "/v1/router/workers", "/v1/router/workers", [this](const Exchange& e) { AnswerWorkers(e); });
  routes.Add("GET", "/metrics", "/metrics", [this](const Exchange& e) { AnswerMetrics(e); });
  routes.Add("GET", "/admin/usage", "/admin/usage", [this](const Exchange& e) { admin->Usage(e); });  // admin key
  routes.SetAuthorizer([this](const net::HttpRequest& r) { return keys->Allows(r); });
}

void RouterServer::Impl::AnswerHealth(const std::shared_ptr<net::Exchange>& exchange) {
  asio::post(ioc, [this, exchange] {
    const int healthy = loads.num_healthy();
    Respond(exchange, healthy > 0 ? 200 : 503,
            Json{{"status", healthy > 0 ? "ok" : "no healthy worker"}, {"healthy_workers", healthy}, {"workers", pool.size()}});
  });
}

void RouterServer::Impl::AnswerMetrics(const std::shared_ptr<net::Exchange>& exchange) {
  asio::post(ioc, [this, exchange] {
    const meter::EconomicsSample sample = fleet_counters.Add(pool, base::MonotonicSeconds());
    meter::ExportEconomics(metrics, "flashserve_fleet_", config.economics, economics.Observe(sample));
    net::ExportProcessMetrics(metrics);
    net::HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = metrics.Render();
    exchange->Post([exchange, r = std::move(r)]() mutable { exchange->Respond(std::move(r)); });
  });
}

meter::EconomicsSample RouterServer::Impl::FleetCounters::Add(const WorkerPool& pool, double now_s) {
  last.resize(static_cast<size_t>(pool.size()));
  // Since the last read, the engines then healthy were there.
  if (last_now_s > 0) engine_seconds += engines * (now_s - last_now_s);
  last_now_s = now_s;
  engines = 0;
  for (int w = 0; w < pool.size(); ++w) {
    const WorkerStatus& s = pool.status(w);
    if (!s.healthy) continue;
    ++engines;
    Seen& seen = last[static_cast<size_t>(w)];
    const auto tokens = static_cast<double>(s.generated_tokens_total);
    // A worker's counters fall when it restarts: then all it reports is new. A worker seen for
    // the first time brings only a baseline (not its whole past).
    if (seen.known) {
      generated += tokens >= seen.generated ? tokens - seen.generated : tokens;
      busy += s.engine_busy_seconds_total >= seen.busy ? s.engine_busy_seconds_total - seen.busy
                                                       : s.engine_busy_seconds_total;
    }
    seen = {true, tokens, s.engine_busy_seconds_total};
  }
  return meter::EconomicsSample{now_s, generated, busy, engine_seconds};
}

void RouterServer::Impl::AnswerModels(const std::shared_ptr<net::Exchange>& exchange) {
  asio::post(ioc, [this, exchange] {
    Json data = Json::array();
    std::vector<std::string> seen;
    for (int w = 0; w < pool.size(); ++w) {
      const WorkerStatus& s = pool.status(w);
      if (!s.healthy || std::find(seen.begin(), seen.end(), s.model) != seen.end()) continue;
      seen.push_back(s.model);
      data.push_back({{"id", s.model}, {"object", "model"}, {"created", 0}, {"owned_by", "flashserve"}});
    }
    Respond(exchange, 200, Json{{"object", "list"}, {"data", std::move(data)}});
  });
}

void RouterServer::Impl::AnswerWorkers(const std::shared_ptr<net::Exchange>& exchange) {
  asio::post(ioc, [this, exchange] {
    Json list = Json::array();
    for (int w = 0; w < pool.size(); ++w) {
      const WorkerStatus& s = pool.status(w);
      Json j = {{"url", s.url}, {"healthy", s.healthy}, {"model", s.model}, {"role", protocol::WorkerRoleName(s.role)},
                {"kv_epoch", s.epoch}, {"kv_last_seq", s.last_seq}, {"kv_events", s.events},
                {"kv_resyncs", s.resyncs}, {"poll_failures", s.poll_failures}, {"last_error", s.last_error}};
      if (loads.present(w)) {
        j["queued_prefill_tokens"] = loads.load(w).queued_prefill_tokens;
        j["running"] = loads.load(w).running_sequences;
        j["prefill_tokens_per_second"] = loads.load(w).prefill_tokens_per_s;
      }
      list.push_back(std::move(j));
    }
    const PrefixIndexStats st = index.stats();
    Respond(exchange, 200,
            Json{{"policy", PolicyName(config.chooser.policy)}, {"workers", std::move(list)},
                 {"index", {{"hashes", st.hashes}, {"private_entries", st.private_entries},
                            {"shared_entries", st.shared_entries}, {"gaps", st.gaps}}}});
  });
}

RouterServer::RouterServer(const RouterConfig& config, const tokenizer::Tokenizer& tokenizer)
    : impl_(std::make_unique<Impl>(config, tokenizer)) {}

RouterServer::~RouterServer() { Stop(); }

base::Status RouterServer::Start() {
  Impl& m = *impl_;
  FS_RETURN_IF_ERROR(m.config.Validate());
  for (const std::string& url : m.config.workers) FS_RETURN_IF_ERROR(m.pool.Add(url).status());
  m.http = std::make_unique<net::HttpServer>(m.config.http,
                                             [&m](std::shared_ptr<net::Exchange> e) { m.routes.Handle(std::move(e)); });
  FS_RETURN_IF_ERROR(m.http->Start());
  m.work.emplace(m.ioc.get_executor());
  m.pool.Start();
  m.thread = std::thread([&m] { m.ioc.run(); });
  m.started = true;
  return base::Status::Ok();
}

int RouterServer::port() const { return impl_->http ? impl_->http->port() : 0; }

void RouterServer::Stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.started = false;
  m.http->StopAccepting();
  asio::post(m.ioc, [&m] { m.pool.Stop(); });
  m.http->Stop();
  m.work.reset();
  m.ioc.stop();
  if (m.thread.joinable()) m.thread.join();
}

}  // namespace flashserve::router
