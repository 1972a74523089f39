// Per-tenant limits (meter/limiter.h).
#include "meter/limiter.h"

#include <algorithm>

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
  if (limits.requests_per_minute > 0 && requests + 1 > limits.requests_per_minute)
    refuse("requests per minute", s.requests.SecondsUntilBelow(now_s, limits.requests_per_minute, 1));
  else if (limits.input_tokens_per_minute > 0 && input + input_tokens > limits.input_tokens_per_minute)
    refuse(input_tokens > limits.input_tokens_per_minute ? "input tokens per minute (the prompt alone exceeds it)"
                                                         : "input tokens per minute",
           s.input.SecondsUntilBelow(now_s, limits.input_tokens_per_minute, std::min(input_tokens,
                                                                                      limits.input_tokens_per_minute)));
  else if (limits.output_tokens_per_minute > 0 && output >= limits.output_tokens_per_minute)
    refuse("output tokens per minute", s.output.SecondsUntilBelow(now_s, limits.output_tokens_per_minute - 1, 0));
  else if (limits.concurrent_requests > 0 && s.concurrent >= limits.concurrent_requests)
    refuse("concurrent requests", 1);
  else if (limits.monthly_budget > 0 && s.synced_spend + s.local_spend >= limits.monthly_budget)
    refuse("monthly budget", 3600);
  d.requests_remaining = std::max<int64_t>(0, limits.requests_per_minute - requests - (d.allowed ? 1 : 0));
  d.input_remaining = std::max<int64_t>(0, limits.input_tokens_per_minute - input - (d.allowed ? input_tokens : 0));
  d.output_remaining = std::max<int64_t>(0, limits.output_tokens_per_minute - output);
  d.reset_s = requests > 0 || input > 0 || output > 0 ? 60 : 0;
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
  s.local_spend += cost;
}

void TenantLimiter::SyncSpend(const std::map<std::string, int64_t>& month_spend, int64_t month_start_s) {
  std::lock_guard lock(mu_);
  month_start_s_ = month_start_s;
  for (auto& [name, s] : tenants_) {
    auto it = month_spend.find(name);
    s.synced_spend = it == month_spend.end() ? 0 : it->second;
    s.local_spend = 0;
  }
  for (const auto& [name, spend] : month_spend) tenants_[name].synced_spend = spend;
}

int64_t TenantLimiter::concurrent(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.concurrent;
}

int64_t TenantLimiter::spend(const std::string& tenant) const {
  std::lock_guard lock(mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.synced_spend + it->second.local_spend;
}

}  // namespace flashserve::meter
