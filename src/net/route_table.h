// Method + path -> route handler for every HTTP front (the worker's API and the router): 404 for
// unknown paths, 405 with Allow for a known path and another method, 401 for routes that need a
// key the authorizer refuses, and per-route request metrics (status, latency) through a callback.
// Built once at start-up, then read-only; Handle runs on the HTTP session strand that read the
// request.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/api_error.h"
#include "net/exchange.h"
#include "net/prometheus.h"

namespace flashserve::net {

class RouteTable {
 public:
  using Handler = std::function<void(const std::shared_ptr<Exchange>&)>;
  // One finished exchange: the route's label, its status (499: the client went away first) and
  // its duration in seconds. Called on an I/O thread.
  using RecordFn = std::function<void(const std::string& label, int status, double seconds)>;
  // Whether a request may use a route added with needs_key (false: 401).
  using AuthorizeFn = std::function<bool(const HttpRequest&)>;

  explicit RouteTable(RecordFn record = nullptr) : record_(std::move(record)) {}

  // `path` is matched exactly, or as a prefix when it ends in '*'. `label` names the route in
  // metrics (e.g. "/v1/chat/completions" for its aliases too). `errors`: the body shape of the
  // 401 and 405 answers for this path.
  void Add(std::string method, std::string path, std::string label, Handler handler, bool needs_key = false,
           ErrorDialect errors = ErrorDialect::kOpenAI);
  // Without an authorizer every route is open (a local development server).
  void SetAuthorizer(AuthorizeFn authorize) { authorize_ = std::move(authorize); }
  // Dispatches (unknown path: 404, known path with another method: 405 + Allow).
  void Handle(std::shared_ptr<Exchange> exchange) const;

 private:
  struct Route {
    std::string method, path, label;
    Handler handler;
    bool needs_key = false;
    ErrorDialect errors = ErrorDialect::kOpenAI;
    bool Matches(const std::string& p) const;
  };
  std::vector<Route> routes_;
  RecordFn record_;
  AuthorizeFn authorize_;
};

// One finished exchange as `<prefix>http_requests_total{route,status}` and
// `<prefix>http_request_duration_seconds{route}` (the families every HTTP front exports).
void RecordExchange(MetricsRegistry& registry, const std::string& prefix, const std::string& route, int status,
                    double seconds);

}  // namespace flashserve::net
