// Tenants' limits as one server enforces them: requests, input tokens and output tokens per
// minute (sliding 60 one-second buckets), concurrent requests, and the monthly budget (this
// month's spend in the store, refreshed by SyncSpend, plus what this process added since).
// Admit hands out a Slot that holds a concurrency place until destroyed. Any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "meter/tenant.h"
#include "meter/usage.h"

namespace flashserve::meter {

class TenantLimiter;

// A request's place under its tenant's concurrency limit; released when destroyed.
class LimitSlot {
 public:
  LimitSlot(TenantLimiter* limiter, std::string tenant) : limiter_(limiter), tenant_(std::move(tenant)) {}
  ~LimitSlot();
  LimitSlot(const LimitSlot&) = delete;
  LimitSlot& operator=(const LimitSlot&) = delete;
  // Output tokens produced and the request's cost (micro-units), counted once at its end,
  // before its final ledger record is handed to the ledger.
  void Finish(int64_t output_tokens, int64_t cost, int64_t now_s);
  const std::string& tenant() const { return tenant_; }

 private:
  TenantLimiter* limiter_;
  std::string tenant_;
  bool finished_ = false;
};

// What a limit check says, with the figures clients see in rate-limit headers.
struct LimitDecision {
  bool allowed = true;
  bool never = false;       // refused for good: the prompt alone exceeds the input tokens per minute
  bool budget = false;      // refused by the monthly budget (until the next month)
  std::string reason;       // the limit that refused: "requests per minute", ...
  int retry_after_s = 0;    // > 0 when refused and waiting helps
  // Per-minute figures (limit 0 = none), remaining after this request, and seconds until each
  // window is empty again (0 = empty now).
  int64_t requests_limit = 0, requests_remaining = 0;
  int64_t input_limit = 0, input_remaining = 0;
  int64_t output_limit = 0, output_remaining = 0;
  int requests_reset_s = 0, input_reset_s = 0, output_reset_s = 0;
  std::unique_ptr<LimitSlot> slot;  // set when allowed
};

class TenantLimiter {
 public:
  // Checks every limit of `limits` for a request of `input_tokens` arriving at now_s (Unix
  // seconds); when allowed, counts it and returns its slot.
  LimitDecision Admit(const std::string& tenant, const Limits& limits, int64_t input_tokens, int64_t now_s);
  // This month's spend per tenant as the store has it (the ledger's sums, read while no write is
  // under way); the spend of requests ended here and not yet written is kept on top.
  void SyncSpend(const std::map<std::string, int64_t>& month_spend, int64_t month_start_s);
  // How the fleet's figures from the ledger meet what this process counted: kReplace for the
  // router's output (it sees no request end), kAtLeast for a worker (each second's count raised
  // to the fleet's, which holds this worker's own requests once its ledger has written them).
  enum class Merge { kReplace, kAtLeast };
  // The output tokens per tenant and second (Unix) of the requests that ended anywhere in the
  // fleet during the last minute, as the ledger has them.
  void SyncOutput(const std::map<std::string, std::map<int64_t, int64_t>>& by_second, int64_t now_s,
                  Merge merge = Merge::kReplace);
  // The requests and prompt tokens per tenant and second of arrival anywhere in the fleet during
  // the last minute: a worker's per-minute counts raised to them (kAtLeast), so workers without
  // a router share their tenants' limits within a ledger flush and a refresh.
  void SyncArrivals(const std::map<std::string, std::map<int64_t, Arrivals>>& by_second, int64_t now_s);
  // The ledger wrote a request's final record: its cost moves from unwritten to the store's.
  void Written(const std::string& tenant, int64_t cost);
  int64_t concurrent(const std::string& tenant) const;
  int64_t spend(const std::string& tenant) const;

 private:
  friend class LimitSlot;
  struct Window {  // 60 one-second buckets
    std::array<int64_t, 60> counts{};
    std::array<int64_t, 60> seconds{};
    int64_t Sum(int64_t now_s) const;
    void Add(int64_t now_s, int64_t n);
    int SecondsUntilBelow(int64_t now_s, int64_t limit, int64_t adding) const;
    int SecondsUntilEmpty(int64_t now_s) const;
    void Clear() { counts.fill(0); }
    void Raise(int64_t second, int64_t n);  // that second's count to at least n
  };
  struct State {
    Window requests, input, output;
    int64_t concurrent = 0;
    int64_t synced_spend = 0;     // in the store (as of the last sync, plus writes since)
    int64_t unwritten_spend = 0;  // ended here, final record not yet written
  };
  void Release(const std::string& tenant);
  void Finished(const std::string& tenant, int64_t output_tokens, int64_t cost, int64_t now_s);

  mutable std::mutex mu_;
  std::map<std::string, State> tenants_;
  int64_t month_start_s_ = 0;  // of the spend last synced
};

}  // namespace flashserve::meter
