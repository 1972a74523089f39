// The worker API's metric families (names, help texts, buckets) on a Prometheus registry.
// Callers: the api's route table, GenerationJob, /metrics. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "base/clock.h"
#include "meter/economics.h"
#include "net/prometheus.h"
#include "grammar/grammar_cache.h"
#include "serve/service.h"

namespace flashserve::api {

// The api's metric families: names, help texts and buckets in one place.
class ApiMetrics {
 public:
  // One finished HTTP exchange: flashserve_http_requests_total{route,status} and
  // flashserve_http_request_duration_seconds{route}.
  void RecordRequest(const std::string& route, int status, double seconds);
  // Request arrival -> first generated token reaching the api.
  void RecordTimeToFirstToken(double seconds);
  // Gap between consecutive tokens of one choice.
  void RecordInterTokenLatency(double seconds);
  // The hourly cost, capacity and API prices of the live economics (before serving).
  void ConfigureEconomics(const meter::EconomicsConfig& config);
  // Engine gauges and token counters, copied from Service::Stats() before each scrape, and the
  // live economics computed from them.
  void SetServiceStats(const serve::ServiceStats& stats);
  void SetKvTierStats(const serve::ServiceStats& stats);
  // The structured-output grammar cache: compilations, hits, refusals, compile time, entries.
  void SetGrammarStats(const grammar::GrammarCache::Stats& stats);
  // The process_* families (descriptors, memory, CPU) from /proc, at each scrape.
  void SetProcessStats();
  // One remote picture fetched (outcome "ok", "refused", "failed" or "too_large"): count, bytes, time.
  void RecordImageFetch(const std::string& outcome, int64_t bytes, double seconds);
  std::string Render() const { return registry_.Render(); }
  // Moving average of the time to first token (0 before the first), for the router's load view.
  double RecentTimeToFirstToken() const { return recent_ttft_.load(std::memory_order_relaxed); }

 private:
  net::MetricsRegistry registry_;
  std::atomic<double> recent_ttft_{0};
  std::unique_ptr<meter::LiveEconomics> economics_ = std::make_unique<meter::LiveEconomics>(meter::EconomicsConfig{});
  const double started_s_ = base::MonotonicSeconds();  // the engine's seconds count from here
};

}  // namespace flashserve::api
