// The ledger's writer thread (meter/ledger.h).
#include "meter/ledger.h"

#include <chrono>
#include <ctime>
#include <vector>

#include "base/clock.h"
#include "base/wall_time.h"
#include "base/log.h"

namespace flashserve::meter {

namespace {
// Pending records beyond this while the store refuses writes: progress of requests not yet
// pending is dropped (final records are always kept).
constexpr size_t kMaxPending = 1'000'000;
}  // namespace

Ledger::Ledger(MeterStore* store, double flush_interval_s)
    : store_(store), interval_s_(flush_interval_s), thread_([this] { Loop(); }) {}

Ledger::~Ledger() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  base::Status last = Flush();
  if (!last.ok()) FS_LOG(kError, "usage ledger: {} records not written: {}", stats().pending, last.ToString());
}

void Ledger::Put(UsageRecord record) {
  PriceRecord(&record);
  std::lock_guard lock(mu_);
  if (pending_.size() >= kMaxPending && record.status == UsageStatus::kInterrupted &&
      pending_.count(record.request_id) == 0) {
    ++stats_.dropped_progress;  // its final record will still be kept
    return;
  }
  std::string id = record.request_id;
  pending_[std::move(id)] = std::move(record);
  stats_.pending = static_cast<int64_t>(pending_.size());
}

base::Status Ledger::Flush() {
  std::lock_guard write_lock(write_mu_);
  std::map<std::string, UsageRecord> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(pending_);
  }
  if (batch.empty()) return base::Status::Ok();
  std::vector<UsageRecord> records;
  records.reserve(batch.size());
  for (auto& [id, r] : batch) records.push_back(r);
  base::Status s = store_->WriteUsage(records);
  std::lock_guard lock(mu_);
  if (s.ok()) {
    stats_.written += static_cast<int64_t>(records.size());
    if (limiter_ != nullptr)
      for (const UsageRecord& r : records)
        if (r.status != UsageStatus::kInterrupted) limiter_->Written(r.tenant, r.cost);
  } else {
    ++stats_.failed_writes;
    for (auto& [id, r] : batch) pending_.emplace(id, std::move(r));  // newer Puts win
  }
  stats_.pending = static_cast<int64_t>(pending_.size());
  return s;
}

base::Result<MonthSpend> QueryMonthSpend(MeterStore& store, int64_t now_us) {
  FS_ASSIGN_OR_RETURN(UsageQuery query, MakeUsageQuery("", "", "", "tenant", now_us));
  FS_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store.QueryUsage(query));
  MonthSpend spend;
  spend.month_start_s = query.from_us / 1'000'000;
  for (const UsageRow& r : rows) spend.by_tenant[r.group] += r.cost;
  return spend;
}

base::Status Ledger::SyncSpendTo(TenantLimiter* limiter, double every_s) {
  {
    std::lock_guard lock(mu_);
    limiter_ = limiter;
    sync_every_s_ = every_s;
  }
  return SyncSpend();
}

base::Status Ledger::SyncSpend() {
  TenantLimiter* limiter = nullptr;
  {
    std::lock_guard lock(mu_);
    limiter = limiter_;
    last_sync_s_ = base::MonotonicSeconds();
  }
  if (limiter == nullptr) return base::Status::Ok();
  // No write between the query and the update: the store's sums and Written() stay in step.
  std::lock_guard write_lock(write_mu_);
  FS_ASSIGN_OR_RETURN(MonthSpend spend, QueryMonthSpend(*store_, base::UnixMicros()));
  limiter->SyncSpend(spend.by_tenant, spend.month_start_s);
  return base::Status::Ok();
}

Ledger::Stats Ledger::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Ledger::Loop() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return stop_; })) {
    lock.unlock();
    base::Status s = Flush();
    if (!s.ok()) FS_LOG(kWarning, "usage ledger: write failed, kept for the next pass: {}", s.ToString());
    lock.lock();
    if (limiter_ != nullptr && base::MonotonicSeconds() - last_sync_s_ >= sync_every_s_) {
      lock.unlock();
      base::Status synced = SyncSpend();
      if (!synced.ok()) FS_LOG(kWarning, "usage ledger: monthly spend not refreshed: {}", synced.ToString());
      lock.lock();
    }
  }
}

}  // namespace flashserve::meter
