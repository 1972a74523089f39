// RouterServer: `flashserve router`, the front door over N workers (design.md section 6). Serves
// the workers' OpenAI-compatible API, hashes each prompt into cache blocks, picks a worker with
// the Chooser (cache- and load-aware by default), forwards the request (streams included),
// retries on another worker when one fails before the first byte, sheds load with 429 +
// Retry-After, and exports router metrics. Start/Stop from one controlling thread; routing state
// lives on one routing thread, HTTP I/O on the net server's threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "dialect/reasoning_seal.h"
#include "encoding/version.h"
#include "meter/api_keys.h"
#include "meter/economics.h"
#include "meter/key_directory.h"
#include "meter/limiter.h"
#include "net/http_server.h"
#include "router/policy.h"
#include "router/worker_pool.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::router {

struct RouterConfig {
  net::HttpServerConfig http;
  std::vector<std::string> workers;        // base URLs, "http://127.0.0.1:8001"
  ChooserConfig chooser;
  PoolConfig pool;
  // Chat prompt format for prefix hashing; nullopt = the one the workers report (v4 until one
  // answered).
  std::optional<encoding::EncodingVersion> encoding_version;
  // The fleet's reasoning seal (the workers' --seal-key-file): Messages and Responses turns
  // that hand reasoning back are then tokenized exactly (null: estimated by their visible text).
  std::shared_ptr<const dialect::ReasoningSeal> seal;
  std::vector<meter::ApiKey> api_keys;       // empty: no authentication at the router
  std::shared_ptr<meter::ApiKeyRing> key_ring;  // live (metering store); when set, used instead
  // Tenants' limits, enforced here for the whole fleet (both from the metering store; both
  // outlive the server); null = the workers enforce them alone, each for itself.
  meter::TenantLimiter* limiter = nullptr;
  const meter::KeyDirectory* tenants = nullptr;
  // The /admin routes: their keys (empty: 403) and the store they read (null: 404; outlives
  // the server).
  std::vector<meter::ApiKey> admin_keys;
  meter::MeterStore* meter_store = nullptr;
  // The whole fleet's hourly cost, capacity and API prices for the economics in /metrics
  // (flashserve_fleet_*; output and busy time summed over the workers' load reports).
  meter::EconomicsConfig economics;
  int max_attempts = 3;                    // workers tried per request before giving up
  int64_t max_index_entries_per_worker = int64_t{1} << 22;
  base::Status Validate() const;
};

class RouterServer {
 public:
  RouterServer(const RouterConfig& config, const tokenizer::Tokenizer& tokenizer);
  ~RouterServer();  // Stop()
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Validates the config, starts the routing thread (worker polls) and the HTTP server.
  base::Status Start();
  int port() const;
  // Stops accepting, ends the polls, closes connections, joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::router
