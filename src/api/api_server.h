// The HTTP API of one engine worker: OpenAI-compatible routes over the HTTP server, wired to a
// serve::Service and the tokenizer. Built and driven by app and tests from one controlling
// thread; stop the Service before destroying it (the Service's sinks post into this server).
#pragma once

#include <memory>

#include "meter/admin_http.h"
#include "meter/api_keys.h"
#include "net/http_server.h"
#include "api/image_fetch.h"
#include "api/metrics.h"
#include "dialect/reasoning_seal.h"
#include "api/response_json.h"
#include "net/route_table.h"
#include "api/routes.h"
#include "base/result.h"
#include "serve/service.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api {

struct ApiConfig {
  net::HttpServerConfig http;
  RouteOptions routes;
  std::vector<meter::ApiKey> api_keys;  // empty: no authentication
  // A live ring kept by the metering store's KeyDirectory; when set, used instead of api_keys.
  std::shared_ptr<meter::ApiKeyRing> key_ring;
  // The metering store's usage ledger and tenants (null = none); not owned, outlive the server.
  meter::Ledger* ledger = nullptr;
  const meter::KeyDirectory* tenants = nullptr;
  meter::MeterStore* meter_store = nullptr;
  meter::TenantLimiter* limiter = nullptr;  // tenants' limits, checked at admission
  meter::EconomicsConfig economics;         // prices for the live economics in /metrics
  std::vector<meter::ApiKey> admin_keys;  // empty: admin routes answer 403
  // Seals reasoning handed to stateless clients (Messages signatures, Responses
  // encrypted_content); null: thinking blocks and encrypted reasoning cannot be returned.
  std::shared_ptr<const dialect::ReasoningSeal> seal;
  // Compiled structured-output grammars, shared with the engine loop; null: constraints are 400s.
  std::shared_ptr<grammar::GrammarCache> grammars;
  base::Status Validate() const;
};

class ApiServer {
 public:
  ApiServer(const ApiConfig& config, serve::Service& service, const tokenizer::Tokenizer& tokenizer);
  ~ApiServer();

  // Validates the config, binds and starts the I/O threads.
  base::Status Start();
  int port() const { return http_->port(); }
  void StopAccepting() { http_->StopAccepting(); }
  // Waits until no response is pending or `timeout_seconds` passed; true when idle.
  bool WaitIdle(double timeout_seconds) const;
  // Closes every connection and joins the I/O threads.
  void Stop() { http_->Stop(); }
  ApiMetrics& metrics() { return metrics_; }
  // Decode side of disaggregated serving; set before Start (not owned; outlives this server).
  void SetTransferInbox(serve::TransferInbox* inbox) { context_.inbox = inbox; }

 private:
  ApiConfig config_;
  ApiMetrics metrics_;
  IdSource ids_;
  std::shared_ptr<meter::ApiKeyRing> keys_;
  std::unique_ptr<meter::AdminRoutes> admin_;  // /admin/...: its own keys, its own query thread
  RouteContext context_;
  std::unique_ptr<ImageFetchStage> fetch_;  // remote pictures ahead of the routes that take them
  net::RouteTable routes_;
  std::unique_ptr<net::HttpServer> http_;
};

}  // namespace flashserve::api
