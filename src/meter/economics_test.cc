// Live economics: rates over the last minute, utilization, cost per million output tokens at
// the current load, break-even utilization, restarts, and the exported gauges
// (meter/economics.h).
#include "meter/economics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace flashserve::meter {
namespace {

EconomicsConfig Priced(double capacity = 0) {
  EconomicsConfig c;
  c.cost_per_hour = 3.6;  // $0.001 a second
  c.capacity_tokens_per_s = capacity;
  c.api_output_prices = {1.0, 20.0};
  return c;
}

TEST(EconomicsTest, RatesCostAndBreakEvenFromTwoSamples) {
  LiveEconomics e(Priced());
  EconomicsFigures f = e.Observe({100, 0, 0, 100});
  EXPECT_EQ(f.window_s, 0);
  EXPECT_FALSE(f.cost_per_million_output.has_value());  // nothing measured yet
  f = e.Observe({110, 1000, 5, 110});
  EXPECT_DOUBLE_EQ(f.window_s, 10);
  EXPECT_DOUBLE_EQ(f.output_tokens_per_s, 100);
  EXPECT_DOUBLE_EQ(f.utilization, 0.5);
  EXPECT_DOUBLE_EQ(f.capacity_tokens_per_s, 200);  // the current mix at 100% busy
  ASSERT_TRUE(f.cost_per_million_output.has_value());
  EXPECT_DOUBLE_EQ(*f.cost_per_million_output, 10.0);  // $0.001/s over 100 tok/s
  ASSERT_EQ(f.break_even.size(), 2u);
  EXPECT_DOUBLE_EQ(f.break_even[0].utilization, 5.0);  // at $1/M 200 tok/s earn $0.0002/s: never pays
  EXPECT_DOUBLE_EQ(f.break_even[1].utilization, 0.25);
}

TEST(EconomicsTest, AConfiguredCapacityAndTwoEnginesOfAFleet) {
  LiveEconomics e(Priced(4000));
  e.Observe({0, 0, 0, 0});
  EconomicsFigures f = e.Observe({10, 20'000, 10, 20});  // two engines for 10 s
  EXPECT_DOUBLE_EQ(f.utilization, 0.5);  // 10 busy seconds of 2 x 10
  EXPECT_DOUBLE_EQ(f.capacity_tokens_per_s, 4000);
  EXPECT_DOUBLE_EQ(f.break_even[1].utilization, 3.6e6 / (3600 * 4000 * 20.0));
}

TEST(EconomicsTest, TheWindowSlidesAndRestartsBeginItAgain) {
  LiveEconomics e(Priced(), 60);
  e.Observe({0, 0, 0, 0});
  e.Observe({30, 3000, 0, 30});
  e.Observe({70, 7000, 0, 70});
  EconomicsFigures f = e.Observe({100, 13'000, 0, 100});
  EXPECT_DOUBLE_EQ(f.window_s, 70);  // from the sample at 30, the last at or before 40
  EXPECT_DOUBLE_EQ(f.output_tokens_per_s, 10'000.0 / 70);
  f = e.Observe({101, 50, 0, 1});  // the worker restarted: its counters went down
  EXPECT_EQ(f.window_s, 0);
  f = e.Observe({111, 50, 0, 11});  // idle since
  EXPECT_EQ(f.output_tokens_per_s, 0);
  ASSERT_TRUE(f.cost_per_million_output.has_value());
  EXPECT_TRUE(std::isinf(*f.cost_per_million_output));
  ASSERT_EQ(f.break_even.size(), 2u);
  EXPECT_TRUE(std::isnan(f.break_even[0].utilization));  // no capacity known while idle
  f = e.Observe({121, 1060, 10, 31});  // a second engine joined at 111: 10 + 2 x 10 engine seconds
  EXPECT_DOUBLE_EQ(f.window_s, 20);
  EXPECT_DOUBLE_EQ(f.utilization, 10.0 / 30);
}

TEST(EconomicsTest, GaugesCarryTheFiguresThatHaveAValue) {
  net::MetricsRegistry r;
  LiveEconomics e(Priced());
  e.Observe({0, 0, 0, 0});
  ExportEconomics(r, "flashserve_", e.config(), e.Observe({10, 1000, 5, 10}));
  const std::string text = r.Render();
  EXPECT_NE(text.find("flashserve_output_tokens_per_second 100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("flashserve_utilization_ratio 0.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("flashserve_cost_per_hour 3.6\n"), std::string::npos) << text;
  EXPECT_NE(text.find("flashserve_cost_per_million_output_tokens 10\n"), std::string::npos) << text;
  EXPECT_NE(text.find("flashserve_break_even_utilization_ratio{api_output_price=\"20\"} 0.25\n"), std::string::npos)
      << text;
  net::MetricsRegistry unpriced;
  LiveEconomics plain(EconomicsConfig{});
  plain.Observe({0, 0, 0, 0});
  ExportEconomics(unpriced, "flashserve_fleet_", plain.config(), plain.Observe({10, 1000, 5, 10}));
  const std::string bare = unpriced.Render();
  EXPECT_NE(bare.find("flashserve_fleet_output_tokens_per_second 100\n"), std::string::npos) << bare;
  EXPECT_EQ(bare.find("cost"), std::string::npos) << bare;

  // Idle now: the figures that no longer hold are replaced, not kept.
  ExportEconomics(r, "flashserve_", e.config(), e.Observe({80, 1000, 5, 80}));
  const std::string idle = r.Render();
  EXPECT_NE(idle.find("flashserve_output_tokens_per_second 0\n"), std::string::npos) << idle;
  EXPECT_NE(idle.find("flashserve_capacity_output_tokens_per_second 0\n"), std::string::npos) << idle;
  EXPECT_NE(idle.find("flashserve_cost_per_million_output_tokens +Inf\n"), std::string::npos) << idle;
  EXPECT_NE(idle.find("flashserve_break_even_utilization_ratio{api_output_price=\"20\"} NaN\n"), std::string::npos)
      << idle;
}

}  // namespace
}  // namespace flashserve::meter
