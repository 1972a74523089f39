// Route table and server wiring (api/api_server.h).
#include "api/api_server.h"

#include <chrono>
#include <thread>

#include "base/clock.h"

namespace flashserve::api {

base::Status ApiConfig::Validate() const {
  FS_RETURN_IF_ERROR(http.Validate());
  if (routes.default_max_tokens < 1)
    return base::Error(base::ErrorCode::kInvalidArgument, "default max tokens must be >= 1");
  return base::Status::Ok();
}

ApiServer::ApiServer(const ApiConfig& config, serve::Service& service, const tokenizer::Tokenizer& tokenizer)
    : config_(config), routes_([this](const std::string& label, int status, double seconds) {
        metrics_.RecordRequest(label, status, seconds);
      }) {
  context_.service = &service;
  context_.tokenizer = &tokenizer;
  context_.metrics = &metrics_;
  context_.ids = &ids_;
  context_.seal = config.seal.get();
  context_.grammars = config.grammars.get();
  context_.ledger = config.ledger;
  context_.tenants = config.tenants;
  context_.limiter = config.limiter;
  metrics_.ConfigureEconomics(config.economics);
  admin_ = std::make_unique<meter::AdminRoutes>(config.admin_keys, config.meter_store);
  keys_ = config.key_ring ? config.key_ring : std::make_shared<meter::ApiKeyRing>(config.api_keys);
  context_.keys = keys_.get();
  routes_.SetAuthorizer([this](const net::HttpRequest& r) { return keys_->Allows(r); });
  context_.options = config.routes;
  context_.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const RouteContext* ctx = &context_;
  auto bind = [ctx](void (*fn)(const RouteContext&, const ExchangePtr&)) {
    return [ctx, fn](const ExchangePtr& exchange) { fn(*ctx, exchange); };
  };
  const ImageOptions& images = config.routes.images;
  fetch_ = std::make_unique<ImageFetchStage>(images.fetch, images.fetch_threads, 16 * images.fetch_threads, &metrics_);
  // Routes whose bodies may carry pictures: http(s) ones are fetched first.
  auto fetching = [ctx, stage = fetch_.get()](void (*fn)(const RouteContext&, const ExchangePtr&),
                                              net::ErrorDialect errors = net::ErrorDialect::kOpenAI) {
    return [ctx, stage, fn, errors](const ExchangePtr& exchange) {
      stage->Handle(exchange, errors, [ctx, fn](const ExchangePtr& e) { fn(*ctx, e); });
    };
  };
  // DeepSeek's base URL has no /v1; both spellings are served.
  for (const char* prefix : {"/v1", ""}) {
    const std::string p = prefix;
    routes_.Add("POST", p + "/chat/completions", "/v1/chat/completions", fetching(HandleChatCompletions), true);
    routes_.Add("POST", p + "/completions", "/v1/completions", bind(HandleCompletions), true);
    routes_.Add("GET", p + "/models", "/v1/models", bind(HandleListModels), true);
    routes_.Add("GET", p + "/models/*", "/v1/models/{id}", bind(HandleGetModel), true);
  }
  // Anthropic's SDK appends /v1/messages to its base URL; DeepSeek serves it under /anthropic.
  constexpr auto kAnthropic = net::ErrorDialect::kAnthropic;
  for (const char* prefix : {"/v1", "/anthropic/v1", "/anthropic"}) {
    const std::string p = prefix;
    routes_.Add("POST", p + "/messages", "/v1/messages", fetching(HandleMessages, kAnthropic), true, kAnthropic);
    routes_.Add("POST", p + "/messages/count_tokens", "/v1/messages/count_tokens", fetching(HandleCountTokens, kAnthropic), true, kAnthropic);
  }
  routes_.Add("POST", "/v1/responses", "/v1/responses", fetching(HandleResponses), true);
  routes_.Add("POST", "/responses", "/v1/responses", fetching(HandleResponses), true);
  routes_.Add("POST", "/tokenize", "/tokenize", fetching(HandleTokenize), true);
  routes_.Add("POST", "/detokenize", "/detokenize", bind(HandleDetokenize), true);
  // DeepSeek's beta base URL (chat prefix completion, FIM completion).
  routes_.Add("POST", "/beta/chat/completions", "/v1/chat/completions", fetching(HandleChatCompletions), true);
  routes_.Add("POST", "/beta/completions", "/v1/completions", bind(HandleCompletions), true);
  routes_.Add("GET", "/v1/load", "/v1/load", bind(HandleLoad), true);
  routes_.Add("GET", "/v1/kv/events", "/v1/kv/events", bind(HandleKvEvents), true);
  routes_.Add("GET", "/v1/kv/snapshot", "/v1/kv/snapshot", bind(HandleKvSnapshot), true);
  routes_.Add("GET", "/admin/usage", "/admin/usage", [this](const ExchangePtr& e) { admin_->Usage(e); });  // admin key
  routes_.Add("GET", "/health", "/health", bind(HandleHealth));
  routes_.Add("GET", "/metrics", "/metrics", bind(HandleMetrics));
  http_ = std::make_unique<net::HttpServer>(
      config.http, [this](std::shared_ptr<net::Exchange> exchange) { routes_.Handle(std::move(exchange)); },
      [this](int status) { metrics_.RecordRequest("other", status, 0.0); });
}

ApiServer::~ApiServer() { http_->Stop(); }

base::Status ApiServer::Start() {
  FS_RETURN_IF_ERROR(config_.Validate());
  return http_->Start();
}

bool ApiServer::WaitIdle(double timeout_seconds) const {
  const double deadline = base::MonotonicSeconds() + timeout_seconds;
  while (http_->num_open_exchanges() > 0) {
    if (base::MonotonicSeconds() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace flashserve::api
