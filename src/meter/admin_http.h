// The operator's routes over the metering store, for a worker's and the router's HTTP fronts:
// GET /admin/usage (the ledger summed over a time range, grouped). They need an admin key, a
// ring of its own that tenant keys never enter: 403 when none is configured, 401 otherwise.
// Store queries run on a thread of their own (started when keys and a store are configured),
// so a slow store never holds an HTTP I/O thread; the answer is posted back to the exchange's
// strand. Destroy after the HTTP server has stopped. Handle: any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "meter/api_keys.h"
#include "meter/store.h"
#include "net/exchange.h"

namespace flashserve::meter {

class AdminRoutes {
 public:
  // `admin_keys` empty: the routes answer 403. `store` null: 404 (no metering store); it must
  // outlive this object.
  AdminRoutes(const std::vector<ApiKey>& admin_keys, MeterStore* store);
  // Drops what is queued (the HTTP server has stopped: no answer could be sent), waits for the
  // query under way, joins.
  ~AdminRoutes();
  AdminRoutes(const AdminRoutes&) = delete;
  AdminRoutes& operator=(const AdminRoutes&) = delete;

  // GET /admin/usage?from=&to=&tenant=&group_by= (docs/metering.md section 5).
  void Usage(const std::shared_ptr<net::Exchange>& exchange);

 private:
  bool Allowed(const std::shared_ptr<net::Exchange>& exchange) const;
  bool Run(std::function<void()> task);  // false: too many queued
  void Loop();

  ApiKeyRing admin_keys_;
  MeterStore* store_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace flashserve::meter
