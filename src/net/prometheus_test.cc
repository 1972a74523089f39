// Prometheus text rendering: counters, gauges, cumulative histograms, label escaping.
#include "net/prometheus.h"

#include <gtest/gtest.h>

namespace flashserve::net {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndCumulativeHistograms) {
  MetricsRegistry r;
  r.Counter("reqs_total", "Requests", {{"route", "/v1/x"}, {"status", "200"}}).Add();
  r.Counter("reqs_total", "Requests", {{"route", "/v1/x"}, {"status", "200"}}).Add(2);
  r.Gauge("depth", "Queue \"depth\"").Set(4);
  Histogram& h = r.Histo("lat_seconds", "Latency", {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(7);
  const std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE reqs_total counter\nreqs_total{route=\"/v1/x\",status=\"200\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE depth gauge\ndepth 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.1\"} 1\nlat_seconds_bucket{le=\"1\"} 2\nlat_seconds_bucket{le=\"+Inf\"} 3\n"
                      "lat_seconds_sum 7.55\nlat_seconds_count 3\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(RenderLabels({{"a", "q\"\\\n"}}), "{a=\"q\\\"\\\\\\n\"}");
}

}  // namespace
}  // namespace flashserve::net
