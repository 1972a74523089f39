// The usage ledger's writer: requests Put their record (at arrival, as tokens are delivered,
// and once final); a thread of its own writes the records changed since its last pass to the
// metering store every interval, in one transaction. A crash loses at most one interval of
// progress; a request cut by it stays kInterrupted with what was delivered by the last write.
// A failed write keeps the records for the next pass. Put and Flush: any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "base/result.h"
#include "meter/limiter.h"
#include "meter/store.h"

namespace flashserve::meter {

// This calendar month's (UTC) spend per tenant in the store, and the month's first second.
struct MonthSpend {
  std::map<std::string, int64_t> by_tenant;
  int64_t month_start_s = 0;
};
base::Result<MonthSpend> QueryMonthSpend(MeterStore& store, int64_t now_us);

class Ledger {
 public:
  // `store` must outlive the ledger.
  Ledger(MeterStore* store, double flush_interval_s);
  ~Ledger();  // a last Flush, then joins
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // The record's latest state (priced here); replaces an unwritten earlier one.
  void Put(UsageRecord record);
  // Writes what is pending now.
  base::Status Flush();
  // After each pass, at most every `every_s`, tells `limiter` (outlives the ledger) this month's
  // spend per tenant from the store; once now as well. Call before serving.
  base::Status SyncSpendTo(TenantLimiter* limiter, double every_s);

  struct Stats {
    int64_t written = 0;         // records written (a request may be written several times)
    int64_t failed_writes = 0;   // passes that failed
    int64_t pending = 0;
    int64_t dropped_progress = 0;  // in-flight updates not queued while a million records wait
  };
  Stats stats() const;

 private:
  void Loop();
  base::Status SyncSpend();

  MeterStore* store_;
  const double interval_s_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<std::string, UsageRecord> pending_;  // by request id
  std::mutex write_mu_;                         // one pass at a time
  Stats stats_;
  TenantLimiter* limiter_ = nullptr;  // set before serving
  double sync_every_s_ = 10;
  double last_sync_s_ = 0;  // monotonic
  std::thread thread_;
};

}  // namespace flashserve::meter
