// The fleet's usage as tenant limits need it, read from the ledger every server writes: a
// thread that reads, every interval, what each tenant's requests did on every worker in the last
// minute into a TenantLimiter. At the router (kRouter): the output tokens (it sees no request
// end) and, at most every 5 s, this month's spend; requests, input and concurrency it counts
// itself, since every request passes it. At a worker (kWorker): requests, prompt tokens and
// output of the whole fleet, which raise its own counts, so workers without a router share
// per-minute limits (concurrency stays per process; spend comes from its Ledger).
// Start/destroy from one thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "base/result.h"
#include "meter/limiter.h"
#include "meter/store.h"

namespace flashserve::meter {

enum class FleetRole { kRouter, kWorker };

class FleetUsageSync {
 public:
  // Reads once now (an error here is returned: the store is unusable), then every `every_s`.
  // `store` and `limiter` outlive the sync.
  static base::Result<std::unique_ptr<FleetUsageSync>> Start(MeterStore* store, TenantLimiter* limiter, double every_s,
                                                             FleetRole role = FleetRole::kRouter);
  ~FleetUsageSync();  // stops and joins
  FleetUsageSync(const FleetUsageSync&) = delete;
  FleetUsageSync& operator=(const FleetUsageSync&) = delete;

 private:
  FleetUsageSync(MeterStore* store, TenantLimiter* limiter, double every_s, FleetRole role)
      : store_(store), limiter_(limiter), every_s_(every_s), role_(role) {}
  base::Status SyncMinute();  // the last minute's figures
  base::Status SyncSpend();
  void Loop();

  MeterStore* store_;
  TenantLimiter* limiter_;
  const double every_s_;
  const FleetRole role_;
  double last_spend_s_ = 0;  // monotonic
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace flashserve::meter
