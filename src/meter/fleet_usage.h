// The fleet's usage as the router's limits need it: a thread that reads, every interval, the
// output tokens each tenant's requests produced on every worker in the last minute and (at most
// every 5 s) this month's spend, from the ledger the workers write, into the router's
// TenantLimiter. Requests, input tokens and concurrency the router counts itself, since every
// request passes it. Start/destroy from one thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/result.h"
#include "meter/limiter.h"
#include "meter/store.h"

namespace flashserve::meter {

class FleetUsageSync {
 public:
  // Reads once now (an error here is returned: the store is unusable), then every `every_s`.
  // `store` and `limiter` outlive the sync.
  static base::Result<std::unique_ptr<FleetUsageSync>> Start(MeterStore* store, TenantLimiter* limiter, double every_s);
  ~FleetUsageSync();  // stops and joins
  FleetUsageSync(const FleetUsageSync&) = delete;
  FleetUsageSync& operator=(const FleetUsageSync&) = delete;

 private:
  FleetUsageSync(MeterStore* store, TenantLimiter* limiter, double every_s)
      : store_(store), limiter_(limiter), every_s_(every_s) {}
  base::Status SyncOutput();
  base::Status SyncSpend();
  void Loop();

  MeterStore* store_;
  TenantLimiter* limiter_;
  const double every_s_;
  double last_spend_s_ = 0;  // monotonic
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace flashserve::meter
