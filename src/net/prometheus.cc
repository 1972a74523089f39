// Prometheus metrics registry and text rendering (net/prometheus.h).
#include "net/prometheus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace flashserve::net {

namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// Adds `le` to already rendered labels.
std::string WithLe(const std::string& labels, const std::string& le) {
  if (labels.empty()) return "{le=\"" + le + "\"}";
  return labels.substr(0, labels.size() - 1) + ",le=\"" + le + "\"}";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  FS_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()), "histogram buckets must be ascending");
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::Observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::Read() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"";
    for (char c : labels[i].second) {
      if (c == '\\') out += "\\\\";
      else if (c == '"') out += "\\\"";
      else if (c == '\n') out += "\\n";
      else out += c;
    }
    out += '"';
  }
  return out + "}";
}

MetricsRegistry::Family& MetricsRegistry::GetFamily(const std::string& name, Type type, const std::string& help) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  }
  FS_CHECK(it->second.type == type, "metric %s registered with two types", name.c_str());
  return it->second;
}

Value& MetricsRegistry::Counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Type::kCounter, help).values[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Value>();
  return *slot;
}

Value& MetricsRegistry::Gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Type::kGauge, help).values[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Value>();
  return *slot;
}

Histogram& MetricsRegistry::Histo(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                                  const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& f = GetFamily(name, Type::kHistogram, help);
  if (f.buckets.empty()) f.buckets = buckets;
  auto& slot = f.histograms[RenderLabels(labels)];
  if (!slot) slot = std::make_unique<Histogram>(f.buckets);
  return *slot;
}

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    const char* type = f.type == Type::kCounter ? "counter" : f.type == Type::kGauge ? "gauge" : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, type);
    for (const auto& [labels, v] : f.values) out += fmt::format("{}{} {}\n", name, labels, Number(v->value()));
    for (const auto& [labels, h] : f.histograms) {
      Histogram::Snapshot s = h->Read();
      for (size_t i = 0; i < s.upper_bounds.size(); ++i)
        out += fmt::format("{}_bucket{} {}\n", name, WithLe(labels, Number(s.upper_bounds[i])), s.cumulative[i]);
      out += fmt::format("{}_bucket{} {}\n", name, WithLe(labels, "+Inf"), s.cumulative.back());
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, labels, Number(s.sum), name, labels, s.count);
    }
  }
  return out;
}

}  // namespace flashserve::net
