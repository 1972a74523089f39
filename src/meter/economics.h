// The live economics of a worker or a whole fleet (docs/metering.md section 7): from counters
// sampled at each /metrics read (output tokens produced, engine busy seconds), the output tokens
// per second and the utilization (busy fraction) over the last minute; with the hourly cost of
// the hardware, the cost per million output tokens at that load; with the capacity, the
// break-even utilization against API prices. Any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/prometheus.h"

namespace flashserve::meter {

struct EconomicsConfig {
  double cost_per_hour = 0;             // of the hardware the server stands for (0 = not priced)
  double capacity_tokens_per_s = 0;     // output tokens/s at full load (0 = estimated from the load)
  std::vector<double> api_output_prices;  // per million output tokens, to break even against
};

// Counters at one moment (never decreasing but on a restart). `engine_seconds_total` is the
// time the engines the busy seconds add up over have been there (a worker: its uptime; a fleet:
// the sum over its healthy workers).
struct EconomicsSample {
  double now_s = 0;  // monotonic
  double output_tokens_total = 0;
  double busy_seconds_total = 0;
  double engine_seconds_total = 0;
};

struct EconomicsFigures {
  double window_s = 0;             // the span measured (0: not yet two samples)
  double output_tokens_per_s = 0;
  double utilization = 0;          // busy seconds / engine seconds (0..1)
  // Configured, else output_tokens_per_s / utilization (the current mix at full load; 0 while idle).
  double capacity_tokens_per_s = 0;
  std::optional<double> cost_per_million_output;  // priced and measured (infinite while nothing is produced)
  struct BreakEven {
    double api_output_price = 0;
    double utilization = 0;  // above 1: this hardware never beats that price; NaN: no capacity known
  };
  std::vector<BreakEven> break_even;  // one per configured API price, when priced
};

class LiveEconomics {
 public:
  explicit LiveEconomics(EconomicsConfig config, double window_s = 60);
  // Adds a sample and returns the figures over the last window. Counters that went down (a
  // restart) start the window again.
  EconomicsFigures Observe(const EconomicsSample& sample);
  const EconomicsConfig& config() const { return config_; }

 private:
  const EconomicsConfig config_;
  const double window_s_;
  std::mutex mu_;
  std::deque<EconomicsSample> samples_;  // oldest first; the first may be older than the window
};

// Sets the gauges PREFIX{output_tokens_per_second, utilization_ratio,
// capacity_output_tokens_per_second} and, when priced, PREFIX{cost_per_hour,
// cost_per_million_output_tokens, break_even_utilization_ratio{api_output_price}}, every one at
// every call (NaN where a figure is not known yet), so none keeps a stale value.
void ExportEconomics(net::MetricsRegistry& registry, const std::string& prefix, const EconomicsConfig& config,
                     const EconomicsFigures& figures);

}  // namespace flashserve::meter
