// The planner's formulas (docs/planner.md section 2).
#include "meter/planner.h"

#include <cmath>

#include "fmt/format.h"

namespace flashserve::meter {
namespace {

constexpr double kHoursPerDay = 24;
constexpr double kHoursPerMonth = 30 * kHoursPerDay;
constexpr double kPerMillion = 1e6;

base::Error Bad(const std::string& message) { return base::Error(base::ErrorCode::kInvalidArgument, message); }

bool Finite(double v) { return std::isfinite(v); }
bool NonNegative(double v) { return Finite(v) && v >= 0; }
bool Positive(double v) { return Finite(v) && v > 0; }

base::Status ValidateBuy(const BuyInputs& b) {
  if (!Positive(b.node_price)) return Bad("--node-price must be a positive amount");
  if (b.gpus_per_node < 1 || b.gpus_per_node > 1024) return Bad("--gpus-per-node must be in [1, 1024]");
  if (!Positive(b.amortization_years) || b.amortization_years > 50)
    return Bad("--amortization-years must be in (0, 50]");
  if (!NonNegative(b.power_kw)) return Bad("--power-kw must be >= 0");
  if (!NonNegative(b.power_price)) return Bad("--power-price must be >= 0");
  if (!NonNegative(b.ops_cost_month)) return Bad("--ops-cost-month must be >= 0");
  return base::Status::Ok();
}

base::Status ValidateApiSide(const PlanInputs& in) {
  for (double p : in.api_output_prices)
    if (!Positive(p)) return Bad("--api-output-price values must be positive");
  if (!in.api_input_price) {
    if (in.input_per_output != 0 || in.cached_fraction != 0 || in.api_cached_price != 0)
      return Bad("--input-per-output, --cached-fraction and --api-cached-price need --api-input-price");
    return base::Status::Ok();
  }
  if (!NonNegative(*in.api_input_price)) return Bad("--api-input-price must be >= 0");
  if (!NonNegative(in.api_cached_price)) return Bad("--api-cached-price must be >= 0");
  if (!Positive(in.input_per_output) || in.input_per_output > 1e6)
    return Bad("--api-input-price needs --input-per-output R > 0 (input tokens per output token)");
  if (!Finite(in.cached_fraction) || in.cached_fraction < 0 || in.cached_fraction > 1)
    return Bad("--cached-fraction must be in [0, 1]");
  return base::Status::Ok();
}

// Output tokens/s, tokens/day and cost per million output tokens at one utilization.
UtilizationRow RowAt(double utilization, double capacity, double cost_per_hour) {
  UtilizationRow row;
  row.utilization = utilization;
  row.output_tokens_per_s = capacity * utilization;
  row.output_tokens_per_day = row.output_tokens_per_s * kHoursPerDay * 3600;
  row.cost_per_million_output = cost_per_hour / (row.output_tokens_per_s * 3600) * kPerMillion;
  return row;
}

// Break-even utilization u*: the utilization at which the cluster's cost per million output
// tokens equals the API price, cost_per_hour * 1e6 / (capacity * 3600 * u*) = price.
BreakEvenRow BreakEvenAt(double price, std::optional<double> input_side, double capacity, double cost_per_hour) {
  BreakEvenRow row;
  row.api_output_price = price;
  const double full_cost = cost_per_hour / (capacity * 3600) * kPerMillion;  // per M tokens at 100%
  row.utilization = full_cost / price;
  row.api_output_tokens_per_cluster_day = cost_per_hour * kHoursPerDay / price * kPerMillion;
  row.break_even_output_tokens_per_month = cost_per_hour * kHoursPerMonth / price * kPerMillion;
  if (input_side) {
    const double with_input = price + *input_side;
    row.api_price_with_input = with_input;
    row.utilization_with_input = full_cost / with_input;
    row.api_output_tokens_per_cluster_day_with_input = cost_per_hour * kHoursPerDay / with_input * kPerMillion;
    row.break_even_output_tokens_per_month_with_input = cost_per_hour * kHoursPerMonth / with_input * kPerMillion;
  }
  return row;
}

CostPlan PlanFor(std::string mode, double cost_per_hour, const PlanInputs& in, double capacity,
                 std::optional<double> input_side) {
  CostPlan plan;
  plan.mode = std::move(mode);
  plan.cost_per_hour = cost_per_hour;
  plan.cost_per_day = cost_per_hour * kHoursPerDay;
  plan.cost_per_month = cost_per_hour * kHoursPerMonth;
  for (double u : in.utilizations) plan.rows.push_back(RowAt(u, capacity, cost_per_hour));
  for (double p : in.api_output_prices) plan.break_even.push_back(BreakEvenAt(p, input_side, capacity, cost_per_hour));
  return plan;
}

// Monthly cost of owned nodes: purchase spread evenly over the amortization period (12 months
// of 30 days a year), power at a constant draw, and the operating cost; per hour = / 720.
double BuyCostPerHour(const BuyInputs& b, int64_t nodes) {
  const double n = static_cast<double>(nodes);
  const double amortization = n * b.node_price / (b.amortization_years * 12);
  const double power = n * b.power_kw * b.power_price * kHoursPerMonth;
  return (amortization + power + b.ops_cost_month) / kHoursPerMonth;
}

}  // namespace

base::Status ValidatePlanInputs(const PlanInputs& in) {
  if (in.prefill_gpus < 0 || in.prefill_gpus > 1'000'000) return Bad("--prefill-gpus must be in [0, 1000000]");
  if (in.decode_gpus < 1 || in.decode_gpus > 1'000'000)
    return Bad("--decode-gpus (or --gpus) must be in [1, 1000000]");
  if (!in.rent && !in.buy) return Bad("give GPU-hour prices (renting) or --node-price (buying)");
  if (in.rent) {
    if (!Positive(in.decode_gpu_hour)) return Bad("--decode-gpu-hour (or --gpu-hour) must be a positive amount");
    if (in.prefill_gpus > 0 && !Positive(in.prefill_gpu_hour))
      return Bad("--prefill-gpu-hour must be a positive amount when --prefill-gpus is set");
  }
  if (!Positive(in.decode_tokens_per_gpu_s))
    return Bad("--decode-tokens-per-gpu-s (or --from-bench) must be a positive rate");
  if (!Finite(in.balance) || in.balance <= 0 || in.balance > 1) return Bad("--balance must be in (0, 1]");
  if (in.utilizations.empty()) return Bad("--utilization needs at least one value");
  for (double u : in.utilizations)
    if (!Finite(u) || u <= 0 || u > 1) return Bad(fmt::format("--utilization {} is not in (0, 1]", u));
  FS_RETURN_IF_ERROR(ValidateApiSide(in));
  if (in.buy) FS_RETURN_IF_ERROR(ValidateBuy(*in.buy));
  return base::Status::Ok();
}

base::Result<PlanResult> ComputePlan(const PlanInputs& in) {
  FS_RETURN_IF_ERROR(ValidatePlanInputs(in));
  PlanResult result;
  result.gpus = in.prefill_gpus + in.decode_gpus;
  result.capacity_output_tokens_per_s =
      static_cast<double>(in.decode_gpus) * in.decode_tokens_per_gpu_s * in.balance;
  if (in.api_input_price) {
    const double f = in.cached_fraction;
    result.input_cost_per_million_output =
        in.input_per_output * ((1 - f) * *in.api_input_price + f * in.api_cached_price);
  }
  const double capacity = result.capacity_output_tokens_per_s;
  if (in.rent) {
    const double per_hour = static_cast<double>(in.prefill_gpus) * in.prefill_gpu_hour +
                            static_cast<double>(in.decode_gpus) * in.decode_gpu_hour;
    result.plans.push_back(PlanFor("rent", per_hour, in, capacity, result.input_cost_per_million_output));
  }
  if (in.buy) {
    // Each pool on nodes of its own: a node is not shared between prefill and decode.
    const int64_t per = in.buy->gpus_per_node;
    const int64_t nodes = (in.prefill_gpus + per - 1) / per + (in.decode_gpus + per - 1) / per;
    CostPlan plan = PlanFor("buy", BuyCostPerHour(*in.buy, nodes), in, capacity, result.input_cost_per_million_output);
    plan.nodes = nodes;
    result.plans.push_back(std::move(plan));
  }
  return result;
}

}  // namespace flashserve::meter
