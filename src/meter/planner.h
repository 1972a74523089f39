// The planner's economics (`flashserve plan`, docs/planner.md): a cluster's cost per hour,
// day and month when renting or buying GPUs, its output-token capacity, the cost per million
// output tokens at each utilization and the break-even utilization against API prices.
// Pure arithmetic on doubles; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace flashserve::meter {

// Owning the hardware instead of renting it.
struct BuyInputs {
  double node_price = 0;          // one node's purchase price
  int64_t gpus_per_node = 8;
  double amortization_years = 3;  // straight-line
  double power_kw = 0;            // one node's draw
  double power_price = 0;         // per kWh
  double ops_cost_month = 0;      // the whole cluster's staff, space and support per 30-day month
};

struct PlanInputs {
  // Disaggregated pools; a single pool is `decode_gpus` alone (prefill_gpus 0): its GPUs both
  // prefill and decode, and all of them count for throughput.
  int64_t prefill_gpus = 0;
  double prefill_gpu_hour = 0;  // rent per GPU-hour (0 with buying only)
  int64_t decode_gpus = 0;
  double decode_gpu_hour = 0;
  bool rent = true;  // false: buying only
  double decode_tokens_per_gpu_s = 0;  // measured output tokens/s of one decode GPU
  double balance = 1.0;                // fraction of that the fleet's load balancing reaches
  std::vector<double> utilizations = {1.0, 0.5, 0.2};
  std::vector<double> api_output_prices;  // per million output tokens
  // The API's input side, charged per output token: `input_per_output` input tokens per output
  // token, `cached_fraction` of them billed at the cached price.
  std::optional<double> api_input_price;
  double api_cached_price = 0;
  double input_per_output = 0;
  double cached_fraction = 0;
  std::optional<BuyInputs> buy;
};

// Checks ranges and consistency; the message names the flag at fault.
base::Status ValidatePlanInputs(const PlanInputs& in);

struct UtilizationRow {
  double utilization = 0;
  double output_tokens_per_s = 0;
  double output_tokens_per_day = 0;
  double cost_per_million_output = 0;
};

struct BreakEvenRow {
  double api_output_price = 0;
  double utilization = 0;                  // output prices only (may exceed 1: never breaks even)
  std::optional<double> api_price_with_input;  // output price + input side per output token
  std::optional<double> utilization_with_input;
  double api_output_tokens_per_cluster_day = 0;  // what a day's cluster cost buys from the API
  std::optional<double> api_output_tokens_per_cluster_day_with_input;
  double break_even_output_tokens_per_month = 0;  // API output tokens a 30-day month's cost buys
  std::optional<double> break_even_output_tokens_per_month_with_input;
};

// One way of paying for the cluster (renting or buying).
struct CostPlan {
  std::string mode;  // "rent" or "buy"
  double cost_per_hour = 0;
  double cost_per_day = 0;
  double cost_per_month = 0;  // 30 days
  std::optional<int64_t> nodes;  // buying: each pool on whole nodes of its own
  std::vector<UtilizationRow> rows;
  std::vector<BreakEvenRow> break_even;
};

struct PlanResult {
  int64_t gpus = 0;
  double capacity_output_tokens_per_s = 0;  // at 100% utilization, balance applied
  std::optional<double> input_cost_per_million_output;  // the API's input side per output token
  std::vector<CostPlan> plans;                          // rent first, then buy, as given
};

// Validated first; the figures follow docs/planner.md's formulas.
base::Result<PlanResult> ComputePlan(const PlanInputs& in);

}  // namespace flashserve::meter
