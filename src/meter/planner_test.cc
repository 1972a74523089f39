// The planner's figures against hand arithmetic (meter/planner.h, docs/planner.md).
#include "meter/planner.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace flashserve::meter {
namespace {

// 64 prefill GPUs at $8.60/h, 64 decode GPUs at $10.50/h, 14,466 output tokens/s per decode GPU,
// 80% balance; API output prices $0.60 / $0.80 / $1.20 per million; 4 input tokens per output
// token, half of them cached, at $0.15 / $0.003 per million.
PlanInputs ReferenceCase() {
  PlanInputs in;
  in.prefill_gpus = 64;
  in.prefill_gpu_hour = 8.60;
  in.decode_gpus = 64;
  in.decode_gpu_hour = 10.50;
  in.decode_tokens_per_gpu_s = 14466;
  in.balance = 0.8;
  in.utilizations = {1.0, 0.5, 0.2};
  in.api_output_prices = {0.60, 0.80, 1.20};
  in.api_input_price = 0.15;
  in.api_cached_price = 0.003;
  in.input_per_output = 4;
  in.cached_fraction = 0.5;
  return in;
}

TEST(PlannerTest, ReferenceCaseByHand) {
  auto plan = ComputePlan(ReferenceCase());
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  ASSERT_EQ(plan->plans.size(), 1u);
  const CostPlan& rent = plan->plans[0];
  // 64 x 8.60 + 64 x 10.50 = 550.40 + 672.00.
  EXPECT_NEAR(rent.cost_per_hour, 1222.40, 1e-9);
  EXPECT_NEAR(rent.cost_per_day, 29337.60, 1e-8);
  EXPECT_NEAR(rent.cost_per_month, 880128.00, 1e-6);
  // 64 x 14,466 x 0.8.
  EXPECT_NEAR(plan->capacity_output_tokens_per_s, 740659.2, 1e-6);
  ASSERT_EQ(rent.rows.size(), 3u);
  EXPECT_NEAR(rent.rows[0].output_tokens_per_day, 63992954880.0, 1e-2);
  // 1222.40 x 1e6 / (740,659.2 x 3600) = 0.458450 per million output tokens at 100%.
  EXPECT_NEAR(rent.rows[0].cost_per_million_output, 0.458450, 1e-6);
  EXPECT_NEAR(rent.rows[1].cost_per_million_output, 0.916901, 1e-6);
  EXPECT_NEAR(rent.rows[2].cost_per_million_output, 2.292252, 1e-6);
  // Input side per output token: 4 x (0.5 x 0.15 + 0.5 x 0.003) = 0.306.
  ASSERT_TRUE(plan->input_cost_per_million_output.has_value());
  EXPECT_NEAR(*plan->input_cost_per_million_output, 0.306, 1e-12);
  ASSERT_EQ(rent.break_even.size(), 3u);
  const double expected_output_only[] = {0.764084, 0.573063, 0.382042};  // 0.458450 / price
  const double expected_with_input[] = {0.506016, 0.414512, 0.304416};   // 0.458450 / (price + 0.306)
  const double expected_day_buys[] = {48.896e9, 36.672e9, 24.448e9};     // 29,337.60 / price x 1e6
  for (int i = 0; i < 3; ++i) {
    const BreakEvenRow& row = rent.break_even[i];
    EXPECT_NEAR(row.utilization, expected_output_only[i], 1e-6) << i;
    ASSERT_TRUE(row.utilization_with_input.has_value());
    EXPECT_NEAR(*row.utilization_with_input, expected_with_input[i], 1e-6) << i;
    EXPECT_NEAR(row.api_output_tokens_per_cluster_day, expected_day_buys[i], 1.0) << i;
    EXPECT_NEAR(row.break_even_output_tokens_per_month, expected_day_buys[i] * 30, 30.0) << i;
  }
}

TEST(PlannerTest, BuyingAmortizesNodesAndPower) {
  PlanInputs in;
  in.decode_gpus = 16;  // one pool
  in.rent = false;
  in.decode_tokens_per_gpu_s = 2000;
  in.utilizations = {1.0};
  in.api_output_prices = {0.80};
  in.buy = BuyInputs{.node_price = 300000, .gpus_per_node = 8, .amortization_years = 3, .power_kw = 10,
                     .power_price = 0.12, .ops_cost_month = 5000};
  auto plan = ComputePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  ASSERT_EQ(plan->plans.size(), 1u);
  const CostPlan& buy = plan->plans[0];
  EXPECT_EQ(buy.mode, "buy");
  ASSERT_TRUE(buy.nodes.has_value());
  EXPECT_EQ(*buy.nodes, 2);
  // 2 x 300,000 / 36 months + 2 x 10 kW x $0.12 x 720 h + 5,000 = 16,666.67 + 1,728 + 5,000.
  EXPECT_NEAR(buy.cost_per_month, 23394.666667, 1e-5);
  EXPECT_NEAR(buy.cost_per_hour, 32.492593, 1e-6);
  // 32.492593 x 1e6 / (32,000 x 3600).
  EXPECT_NEAR(buy.rows[0].cost_per_million_output, 0.282054, 1e-6);
  EXPECT_NEAR(buy.break_even[0].break_even_output_tokens_per_month, 29243333333.3, 1.0);
  EXPECT_NEAR(buy.break_even[0].utilization, 0.352567, 1e-6);
  EXPECT_FALSE(buy.break_even[0].utilization_with_input.has_value());
  in.decode_gpus = 17;  // a partial node is a whole node
  EXPECT_EQ(*ComputePlan(in)->plans[0].nodes, 3);
}

TEST(PlannerTest, RentAndBuyTogetherAndErrorsNameTheFlag) {
  PlanInputs in = ReferenceCase();
  in.buy = BuyInputs{.node_price = 250000};
  auto both = ComputePlan(in);
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->plans.size(), 2u);
  EXPECT_EQ(both->plans[0].mode, "rent");
  EXPECT_EQ(both->plans[1].mode, "buy");
  EXPECT_EQ(*both->plans[1].nodes, 16);  // 64 + 64 GPUs, 8 a node
  in.prefill_gpus = 4;
  in.decode_gpus = 12;
  EXPECT_EQ(*ComputePlan(in)->plans[1].nodes, 3);  // 1 prefill node + 2 decode nodes, never shared

  auto fails_with = [](PlanInputs bad, const std::string& needle) {
    auto r = ComputePlan(bad);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().message();
  };
  PlanInputs bad = ReferenceCase();
  bad.balance = 1.5;
  fails_with(bad, "--balance");
  bad = ReferenceCase();
  bad.utilizations = {0.5, 0};
  fails_with(bad, "--utilization");
  bad = ReferenceCase();
  bad.decode_gpus = 0;
  fails_with(bad, "--decode-gpus");
  bad = ReferenceCase();
  bad.input_per_output = 0;
  fails_with(bad, "--input-per-output");
  bad = ReferenceCase();
  bad.api_input_price.reset();
  fails_with(bad, "need --api-input-price");
  bad = ReferenceCase();
  bad.decode_tokens_per_gpu_s = std::numeric_limits<double>::quiet_NaN();
  fails_with(bad, "--decode-tokens-per-gpu-s");
  bad = ReferenceCase();
  bad.prefill_gpu_hour = 0;
  fails_with(bad, "--prefill-gpu-hour");
  bad = ReferenceCase();
  bad.rent = false;
  fails_with(bad, "--node-price");
}

}  // namespace
}  // namespace flashserve::meter
