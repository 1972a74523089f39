// The fleet's usage for tenant limits, from the ledger (meter/fleet_usage.h).
#include "meter/fleet_usage.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"
#include "base/log.h"
#include "base/wall_time.h"
#include "meter/ledger.h"

namespace flashserve::meter {

namespace {
constexpr double kSpendEveryS = 5;
}

base::Result<std::unique_ptr<FleetUsageSync>> FleetUsageSync::Start(MeterStore* store, TenantLimiter* limiter,
                                                                     double every_s, FleetRole role) {
  std::unique_ptr<FleetUsageSync> sync(new FleetUsageSync(store, limiter, every_s, role));
  FS_RETURN_IF_ERROR(sync->SyncMinute());
  if (role == FleetRole::kRouter) FS_RETURN_IF_ERROR(sync->SyncSpend());
  sync->thread_ = std::thread([s = sync.get()] { s->Loop(); });
  return sync;
}

FleetUsageSync::~FleetUsageSync() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

base::Status FleetUsageSync::SyncMinute() {
  const int64_t now_us = base::UnixMicros();
  const int64_t since_us = now_us - 60'000'000;
  FS_ASSIGN_OR_RETURN(auto output, store_->OutputBySecond(since_us));
  if (role_ == FleetRole::kRouter) {
    limiter_->SyncOutput(output, now_us / 1'000'000, TenantLimiter::Merge::kReplace);
    return base::Status::Ok();
  }
  FS_ASSIGN_OR_RETURN(auto arrivals, store_->ArrivalsBySecond(since_us));
  limiter_->SyncOutput(output, now_us / 1'000'000, TenantLimiter::Merge::kAtLeast);
  limiter_->SyncArrivals(arrivals, now_us / 1'000'000);
  return base::Status::Ok();
}

base::Status FleetUsageSync::SyncSpend() {
  last_spend_s_ = base::MonotonicSeconds();
  FS_ASSIGN_OR_RETURN(MonthSpend spend, QueryMonthSpend(*store_, base::UnixMicros()));
  limiter_->SyncSpend(spend.by_tenant, spend.month_start_s);
  return base::Status::Ok();
}

void FleetUsageSync::Loop() {
  bool failing = false;
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::duration<double>(every_s_), [this] { return stop_; })) {
    lock.unlock();
    base::Status s = SyncMinute();
    if (s.ok() && role_ == FleetRole::kRouter && base::MonotonicSeconds() - last_spend_s_ >= std::max(kSpendEveryS, every_s_))
      s = SyncSpend();
    if (!s.ok() && !failing) FS_LOG(kWarning, "fleet usage not refreshed (limits use the last figures): {}", s.ToString());
    if (s.ok() && failing) FS_LOG(kInfo, "fleet usage refreshed again");
    failing = !s.ok();
    lock.lock();
  }
}

}  // namespace flashserve::meter
