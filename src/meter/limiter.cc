// Per-tenant limits (meter/limiter.h).
#include "meter/limiter.h"

#include <algorithm>
#include <ctime>

namespace flashserve::meter {

LimitSlot::~LimitSlot() { limiter_->Release(tenant_); }

void LimitSlot::Finish(int64_t output_tokens, int64_t cost, int64_t now_s) {
  if (finished_) return;
  finished_ = true;
  limiter_->Finished(tenant_, output_tokens, cost, now_s);
}

int64_t TenantLimiter::Window::Sum(int64_t now_s) const {
  int64_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    if (seconds[i] > now_s - 60 && seconds[i] <= now_s) sum += counts[i];
  return sum;
}

void TenantLimiter::Window::Add(int64_t now_s, int64_t n) {
  const size_t i = static_cast<size_t>(((now_s % 60) + 60) % 60);
  if (seconds[i] != now_s) {
    seconds[i] = now_s;
    counts[i] = 0;
  }
  counts[i] += n;
}

void TenantLimiter::Window::Raise(int64_t second, int64_t n) {
  const size_t i = static_cast<size_t>(((second % 60) + 60) % 60);
  if (seconds[i] > second) return;  // the bucket already holds a later second
  if (seconds[i] != second) {
    seconds[i] = second;
    counts[i] = 0;
  }
  counts[i] = std::max(counts[i], n);
}

// Seconds until the window's sum plus `adding` fits `limit` (buckets leave as they turn 60 s old).
int TenantLimiter::Window::SecondsUntilBelow(int64_t now_s, int64_t limit, int64_t adding) const {
  int64_t sum = Sum(now_s);
  for (int wait = 1; wait <= 60; ++wait) {
    for (size_t i = 0; i < counts.size(); ++i)
      if (seconds[i] == now_s - 60 + wait && seconds[i] <= now_s) sum -= counts[i];
    if (sum + adding <= limit) return wait;
  }
  return 60;
}

int TenantLimiter::Window::SecondsUntilEmpty(int64_t now_s) const {
  int64_t newest = -1;
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0 && seconds[i] > now_s - 60 && seconds[i] <= now_s) newest = std::max(newest, seconds[i]);
  return newest < 0 ? 0 : static_cast<int>(newest + 60 - now_s);
}

namespace {
// Seconds from now_s to the start of the next calendar month (UTC).
int SecondsToNextMonth(int64_t now_s) {
  const std::time_t now = now_s;
  std::tm tm{};
  gmtime_r(&now, &tm);
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  tm.tm_mon += 1;  // timegm normalises December + 1
  return static_cast<int>(std::max<int64_t>(1, static_cast<int64_t>(timegm(&tm)) - now_s));
}
}  // namespace

LimitDecision TenantLimiter::Admit(const std::string& tenant, const Limits& limits, int64_t input_tokens,
                                   int64_t now_s) {
  std::lock_guard lock(mu_);
  State& s = tenants_[tenant];
  LimitDecision d;
  d.requests_limit = limits.requests_per_minute;
  d.input_limit = limits.input_tokens_per_minute;
  d.output_limit = limits.output_tokens_per_minute;
  const int64_t requests = s.requests.Sum(now_s), input = s.input.Sum(now_s), output = s.output.Sum(now_s);
  const auto refuse = [&](std::string reason, int retry_s) {
    d.allowed = false;
    d.reason = std::move(reason);
    d.retry_after_s = std::max(retry_s, 1);
  };
  if (limits.input_tokens_per_minute > 0 && input_tokens > limits.input_tokens_per_minute) {
    refuse("input tokens per minute", 0);
    d.never = true;  // no wait makes room for it
    d.retry_after_s = 0;
  } else if (limits.requests_per_minute > 0 && requests + 1 > limits.requests_per_minute) {
    refuse("requests per minute", s.requests.SecondsUntilBelow(now_s, limits.requests_per_minute, 1));
  } else if (limits.input_tokens_per_minute > 0 && input + input_tokens > limits.input_tokens_per_minute) {
    refuse("input tokens per minute", s.input.SecondsUntilBelow(now_s, limits.input_tokens_per_minute, input_tokens));
  } else if (limits.output_tokens_per_minute > 0 && output >= limits.output_tokens_per_minute) {
    refuse("output tokens per minute", s.output.SecondsUntilBelow(now_s, limits.output_tokens_per_minute - 1, 0));
  } else if (limits.concurrent_requests > 0 && s.concurrent >= limits.concurrent_requests) {
    refuse("concurrent requests", 1);
  } else if (limits.monthly_budget > 0 && s.synced_spend + s.unwritten_spend >= limits.monthly_budget) {
    refuse("monthly budget", SecondsToNextMonth(now_s));
    d.budget = true;
  }
  d.requests_remaining = std::max<int64_t>(0, limits.requests_per_minute - requests - (d.allowed ? 1 : 0));
  d.input_remaining = std::max<int64_t>(0, limits.input_tokens_per_minute - input - (d.allowed ? input_tokens : 0));
  d.output_remaining = std::max<int64_t>(0, limits.output_tokens_per_minute - output);
  d.requests_reset_s = d.allowed ? 60 : s.requests.SecondsUntilEmpty(now_s);
  d.input_reset_s = d.allowed && input_tokens > 0 ? 60 : s.input.SecondsUntilEmpty(now_s);
  d.output_reset_s = s.output.SecondsUntilEmpty(now_s);
  if (!d.allowed) return d;
  s.requests.Add(now_s, 1);
  s.input.Add(now_s, input_tokens);
  ++s.concurrent;
  d.slot = std::make_unique<LimitSlot>(this, tenant);
  return d;
}

void TenantLimiter::Release(const std::string& tenant) {
  std::lock_guard lock(mu_);
  State& s = tenants_[tenant];
  s.concurrent = std::max<int64_t>(0, s.concurrent - 1);
}

void TenantLimiter::Finished(const std::string& tenant, int64_t output_tokens, int64_t cost, int64_t now_s) {
  std::lock_guard lock(mu_);
  State& s = tenants_[tenant];
  s.output.Add(now_s, output_tokens);
  s.unwritten_spend += cost;
}

void TenantLimiter::Written(const std::string& tenant, int64_t cost) {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;  // not admitted here (a key without a tenant)
  it->second.unwritten_spend = std::max<int64_t>(0, it->second.unwritten_spend - cost);
  it->second.synced_spend += cost;
}

void TenantLimiter::SyncSpend(const std::map<std::string, int64_t>& month_spend, int64_t month_start_s) {
  std::lock_guard lock(mu_);
  month_start_s_ = month_start_s;
  for (auto& [name, s] : tenants_) {
    auto it = month_spend.find(name);
    s.synced_spend = it == month_spend.end() ? 0 : it->second;
  }
  for (const auto& [name, spend] : month_spend) tenants_[name].synced_spend = spend;
}

void TenantLimiter::SyncOutput(const std::map<std::string, std::map<int64_t, int64_t>>& by_second, int64_t now_s,
                               Merge merge) {
  std::lock_guard lock(mu_);
  if (merge == Merge::kReplace)
    for (auto& [name, s] : tenants_) s.output.Clear();
  for (const auto& [name, seconds] : by_second)
    for (const auto& [second, tokens] : seconds)
      if (second > now_s - 60 && second <= now_s) {
        Window& w = tenants_[name].output;
        merge == Merge::kReplace ? w.Add(second, tokens) : w.Raise(second, tokens);
      }
}

void TenantLimiter::SyncArrivals(const std::map<std::string, std::map<int64_t, Arrivals>>& by_second, int64_t now_s) {
  std::lock_guard lock(mu_);
  for (const auto& [name, seconds] : by_second) {
    State& s = tenants_[name];
    for (const auto& [second, a] : seconds) {
      if (second <= now_s - 60 || second > now_s) continue;
      s.requests.Raise(second, a.requests);
      s.input.Raise(second, a.input_tokens);
    }
  }
}

int64_t TenantLimiter::concurrent(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.concurrent;
}

int64_t TenantLimiter::spend(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.synced_spend + it->second.unwritten_spend;
}

}  // namespace flashserve::meter
