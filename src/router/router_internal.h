// Internals of RouterServer shared by router_server.cc (set-up, small routes) and proxy.cc
// (routing decisions and forwarding). Fields marked "routing thread" are touched only there.
#pragma once

#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/exchange.h"
#include "net/prometheus.h"
#include "net/route_table.h"
#include "protocol/headers.h"
#include "router/prompt_hasher.h"
#include "meter/admin_http.h"
#include "router/router_server.h"

namespace flashserve::router {

// One client request on its way through the router.
struct ProxyCall {
  std::shared_ptr<net::Exchange> exchange;
  PromptKind kind = PromptKind::kChat;
  std::string path;           // forwarded as is
  std::string body;
  std::string authorization;  // the client's credentials, forwarded
  std::string affinity_key;   // x-session-id, else the body's `user`, else the API key
  std::string cache_namespace;
  bool stream = false;
  net::ErrorDialect errors = net::ErrorDialect::kOpenAI;  // the router's own errors, in the route's shape
  bool named_events = false;  // the stream's events are named (Messages, Responses)
  bool hashable = false;      // tokens are the worker's prompt (else: routed by load only)
  std::vector<int32_t> tokens;
  std::vector<uint64_t> image_keys;  // AffinityHash of each picture's source, prompt order
  double start_s = 0;
  std::atomic<bool> gone{false};  // the client disconnected
  // The tenant's place under its limits at the router (released when the proxying ends) and the
  // fleet-wide rate-limit headers, which replace the worker's.
  std::unique_ptr<meter::LimitSlot> limit_slot;
  net::HeaderList limit_headers;
  bool fleet_limits = false;  // admitted by the router's limiter
};

enum class ForwardResult { kDone, kRetry };

struct RouterServer::Impl {
  Impl(const RouterConfig& c, const tokenizer::Tokenizer& tok);

  void AddRoutes();  // the route table, at construction
  // HTTP I/O strand. `dialect`: the route's wire format (errors, stream events).
  enum class Wire { kOpenAI, kResponses, kAnthropic };
  // `generation`: the route generates tokens, so the tenant's limits apply.
  void StartProxy(std::shared_ptr<net::Exchange> exchange, PromptKind kind, Wire wire = Wire::kOpenAI,
                  bool generation = true);
  // The tenant's limits for the whole fleet (HTTP I/O strand): false when refused (answered).
  bool AdmitTenant(ProxyCall& call, const meter::ApiKey* key);
  void AnswerHealth(const std::shared_ptr<net::Exchange>& exchange);  // posts to the routing thread
  void AnswerModels(const std::shared_ptr<net::Exchange>& exchange);
  void AnswerWorkers(const std::shared_ptr<net::Exchange>& exchange);
  void AnswerMetrics(const std::shared_ptr<net::Exchange>& exchange);  // posts to the routing thread

  // Routing thread.
  boost::asio::awaitable<void> Proxy(std::shared_ptr<ProxyCall> call);
  boost::asio::awaitable<ForwardResult> ForwardTo(const std::shared_ptr<ProxyCall>& call, const Decision& d,
                                                  bool last_attempt, const std::string& transfer_id,
                                                  const std::string& encode_transfers);
  Decision Decide(const ProxyCall& call, Chooser& which, const LoadView& view);
  void Reject(const ProxyCall& call, const Decision& d);
  // Disaggregated serving (disagg_proxy.cc): used when healthy prefill and decode workers exist.
  bool Disaggregated() const;
  // The decode worker's decision; starts the prefill half on a prefill worker, naming the
  // transfer in *transfer_id. A non-routed decision when either half has no worker.
  Decision RouteDisaggregated(const std::shared_ptr<ProxyCall>& call, std::string* transfer_id);
  // A fresh transfer id, 32 hex digits.
  static std::string NewTransferIdHex();
  // A half of a split request (stage "prefill" or "encode") with the router's headers; counts
  // flashserve_router_<stage>_requests_total, reports a transport failure to the pool, logs
  // another status. True when the worker answered 200.
  boost::asio::awaitable<bool> SendHalf(std::shared_ptr<ProxyCall> call, int worker, const char* stage,
                                        net::HeaderList headers);
  boost::asio::awaitable<void> PrefillHalf(std::shared_ptr<ProxyCall> call, int worker, std::string to,
                                           std::string transfer_id, std::string encode_transfers);
  // Pictures (encode_proxy.cc). The workers that may generate (all but --role encode).
  LoadView GenerationView() const;
  // Sends the request's pictures to encode workers, streaming to `target`'s transfer receiver;
  // returns the transfer ids for protocol::kEncodeTransfersHeader ("" = the target encodes).
  std::string StartEncoding(const std::shared_ptr<ProxyCall>& call, int target);
  // Pictures a worker whose cache holds a picture may have queued beyond the least loaded
  // encode worker's before that picture goes to the least loaded one instead.
  static constexpr int64_t kMaxExtraQueuedImages = 2;
  boost::asio::awaitable<void> EncodeHalf(std::shared_ptr<ProxyCall> call, int worker, std::string to,
                                          std::string transfer_id, std::string indices);
  LoadView RoleView(protocol::WorkerRole role) const;
  void RecordUsage(int worker, std::string_view json_text);

  const RouterConfig config;
  const tokenizer::Tokenizer& tokenizer;
  const PromptHasher hasher;
  const std::shared_ptr<meter::ApiKeyRing> keys;  // live when the metering store keeps it
  net::MetricsRegistry metrics;
  meter::LiveEconomics economics;  // the fleet's, observed at each /metrics read
  // The fleet's counters for it, kept increasing across worker restarts (routing thread).
  struct FleetCounters {
    struct Seen {
      bool known = false;
      double generated = 0, busy = 0;
    };
    std::vector<Seen> last;  // per worker id, at the last /metrics read
    double generated = 0, busy = 0, engine_seconds = 0;
    double last_now_s = 0;
    int engines = 0;  // healthy at the last read
    // Folds in the healthy workers' counters at now_s (monotonic).
    meter::EconomicsSample Add(const WorkerPool& pool, double now_s);
  } fleet_counters;
  boost::asio::io_context ioc{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread thread;
  PrefixIndex index;  // routing thread
  LoadView loads;     // routing thread
  Chooser chooser;    // routing thread
  Chooser decode_chooser;  // routing thread: least-load over decode workers
  WorkerPool pool;    // routing thread
  std::unique_ptr<meter::AdminRoutes> admin;  // /admin/...: its own keys and query thread
  net::RouteTable routes;  // read-only once constructed
  std::unique_ptr<net::HttpServer> http;
  bool started = false;
};

}  // namespace flashserve::router
