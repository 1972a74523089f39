// Method + path -> route handler, with 404 / 405 answers and per-route request metrics (count by
// status, latency). Built once at start-up by ApiServer, then read-only; Handle runs on the
// HTTP session strand that read the request.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/api_keys.h"
#include "net/exchange.h"
#include "api/metrics.h"

namespace flashserve::api {

class Router {
 public:
  using Handler = std::function<void(const std::shared_ptr<net::Exchange>&)>;

  explicit Router(ApiMetrics* metrics) : metrics_(metrics) {}

  // `path` is matched exactly, or as a prefix when it ends in '*'. `label` names the route in
  // metrics (e.g. "/v1/chat/completions" for its aliases too).
  void Add(std::string method, std::string path, std::string label, Handler handler, bool needs_key = false);
  // Routes added with needs_key answer 401 unless the request presents one of these keys.
  void SetKeys(const net::ApiKeyRing* keys) { keys_ = keys; }
  // Dispatches (unknown path: 404, known path with another method: 405 + Allow).
  void Handle(std::shared_ptr<net::Exchange> exchange) const;

 private:
  struct Route {
    std::string method, path, label;
    Handler handler;
    bool needs_key = false;
    bool Matches(const std::string& p) const;
  };
  std::vector<Route> routes_;
  ApiMetrics* metrics_;
  const net::ApiKeyRing* keys_ = nullptr;
};

}  // namespace flashserve::api
