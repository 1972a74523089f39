// Live economics (meter/economics.h).
#include "meter/economics.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace flashserve::meter {

LiveEconomics::LiveEconomics(EconomicsConfig config, double window_s)
    : config_(std::move(config)), window_s_(window_s) {}

EconomicsFigures LiveEconomics::Observe(const EconomicsSample& sample) {
  std::lock_guard lock(mu_);
  if (!samples_.empty()) {
    const EconomicsSample& last = samples_.back();
    const bool reset = sample.output_tokens_total < last.output_tokens_total ||
                       sample.busy_seconds_total < last.busy_seconds_total ||
                       sample.engine_seconds_total < last.engine_seconds_total;
    if (reset) samples_.clear();
  }
  samples_.push_back(sample);
  // Keep one sample at or before the window's start, so the span covers the whole window.
  while (samples_.size() > 2 && samples_[1].now_s <= sample.now_s - window_s_) samples_.pop_front();

  EconomicsFigures f;
  const EconomicsSample& first = samples_.front();
  f.window_s = sample.now_s - first.now_s;
  if (f.window_s > 0) {
    f.output_tokens_per_s = (sample.output_tokens_total - first.output_tokens_total) / f.window_s;
    const double engine_seconds = sample.engine_seconds_total - first.engine_seconds_total;
    if (engine_seconds > 0)
      f.utilization = std::clamp((sample.busy_seconds_total - first.busy_seconds_total) / engine_seconds, 0.0, 1.0);
  }
  f.capacity_tokens_per_s = config_.capacity_tokens_per_s > 0 ? config_.capacity_tokens_per_s
                            : f.utilization > 0             ? f.output_tokens_per_s / f.utilization
                                                            : 0;
  if (config_.cost_per_hour > 0 && f.window_s > 0)  // infinite while nothing is produced
    f.cost_per_million_output = f.output_tokens_per_s > 0
                                    ? config_.cost_per_hour * 1e6 / (3600 * f.output_tokens_per_s)
                                    : std::numeric_limits<double>::infinity();
  if (config_.cost_per_hour > 0)  // NaN while no capacity is known
    for (double price : config_.api_output_prices)
      f.break_even.push_back({price, f.capacity_tokens_per_s > 0
                                         ? config_.cost_per_hour * 1e6 / (3600 * f.capacity_tokens_per_s * price)
                                         : std::numeric_limits<double>::quiet_NaN()});
  return f;
}

void ExportEconomics(net::MetricsRegistry& registry, const std::string& prefix, const EconomicsConfig& config,
                     const EconomicsFigures& f) {
  registry.Gauge(prefix + "output_tokens_per_second", "Output tokens per second over the last minute")
      .Set(f.output_tokens_per_s);
  registry.Gauge(prefix + "utilization_ratio", "Busy fraction of the engines' time over the last minute (0..1)")
      .Set(f.utilization);
  registry.Gauge(prefix + "capacity_output_tokens_per_second",
                 "Output tokens per second at full load (configured, else the current mix at 100% busy; 0 = unknown)")
      .Set(f.capacity_tokens_per_s);
  if (config.cost_per_hour <= 0) return;
  registry.Gauge(prefix + "cost_per_hour", "Configured hourly cost of the hardware (--cost-per-hour)")
      .Set(config.cost_per_hour);
  registry.Gauge(prefix + "cost_per_million_output_tokens",
                 "Hardware cost per million output tokens at the current load (+Inf idle, NaN not measured yet)")
      .Set(f.cost_per_million_output.value_or(std::numeric_limits<double>::quiet_NaN()));
  for (const EconomicsFigures::BreakEven& b : f.break_even)
    registry.Gauge(prefix + "break_even_utilization_ratio",
                   "Utilization at which the hardware costs what the API would charge for its output (> 1: never)",
                   {{"api_output_price", fmt::format("{}", b.api_output_price)}})
        .Set(b.utilization);
}

}  // namespace flashserve::meter
