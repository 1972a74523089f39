// Prometheus metrics: counter, gauge and histogram families with labels, rendered as text format
// 0.0.4. Callers: the worker API's metrics and the router's. Thread-safe; references returned by
// the registry live as long as it does.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace flashserve::net {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A counter (only grows) or gauge (set to any value).
class Value {
 public:
  void Add(double delta = 1.0) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implicit
  void Observe(double value);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  Value& Counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Value& Gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  // Buckets are fixed by the first call for a family.
  Histogram& Histo(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                   const Labels& labels = {});
  // Every family in name order, children in label order.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, std::unique_ptr<Value>> values;         // by rendered labels
    std::map<std::string, std::unique_ptr<Histogram>> histograms;  // by rendered labels
  };
  Family& GetFamily(const std::string& name, Type type, const std::string& help);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// `{a="x",b="y"}` with Prometheus escaping ("" for no labels).
std::string RenderLabels(const Labels& labels);

}  // namespace flashserve::net
