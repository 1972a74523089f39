// `flashserve plan`: the cluster economics of docs/planner.md from flags, a JSON file of the
// same names (--file) or a `flashserve bench --json` result; prints a table or --json.
// Main thread only.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "app/commands.h"
#include "base/file_util.h"
#include "fmt/format.h"
#include "meter/planner.h"
#include "nlohmann/json.hpp"

namespace flashserve::app {
namespace {

using Json = nlohmann::json;
using Target = std::variant<double*, int64_t*, std::vector<double>*, std::string*>;

struct PlanFlags {
  int64_t prefill_gpus = 0, decode_gpus = 0, gpus = 0, bench_gpus = 1, gpus_per_node = 8;
  double prefill_gpu_hour = 0, decode_gpu_hour = 0, gpu_hour = 0;
  double tokens_per_gpu_s = 0, balance = 1.0;
  std::vector<double> utilizations = {1.0, 0.5, 0.2}, api_output_prices;
  double api_input_price = 0, api_cached_price = 0, input_per_output = 0, cached_fraction = 0;
  double node_price = 0, amortization_years = 3, power_kw = 0, power_price = 0, ops_cost_month = 0;
  std::string from_bench, file;
  bool json = false;
};

struct FlagSpec {
  const char* name;  // without the leading dashes; also the key in --file
  Target target;
  const char* help;
};

std::vector<FlagSpec> Specs(PlanFlags* f) {
  return {
      {"prefill-gpus", &f->prefill_gpus, "GPUs in the prefill pool"},
      {"prefill-gpu-hour", &f->prefill_gpu_hour, "Rent of one prefill GPU per hour"},
      {"decode-gpus", &f->decode_gpus, "GPUs in the decode pool"},
      {"decode-gpu-hour", &f->decode_gpu_hour, "Rent of one decode GPU per hour"},
      {"gpus", &f->gpus, "GPUs of a single pool that prefills and decodes (instead of the two pools)"},
      {"gpu-hour", &f->gpu_hour, "Rent of one GPU of the single pool per hour"},
      {"decode-tokens-per-gpu-s", &f->tokens_per_gpu_s, "Output tokens/s one decode GPU sustains"},
      {"from-bench", &f->from_bench, "Throughput from a `flashserve bench --json` file (instead of the rate)"},
      {"bench-gpus", &f->bench_gpus, "Decode GPUs the --from-bench run used (default 1)"},
      {"balance", &f->balance, "Fraction of the benchmark that load balancing reaches, (0, 1]"},
      {"utilization", &f->utilizations, "Utilizations to tabulate, comma-separated, (0, 1]"},
      {"api-output-price", &f->api_output_prices, "API prices per million output tokens, comma-separated"},
      {"api-input-price", &f->api_input_price, "API price per million uncached input tokens"},
      {"api-cached-price", &f->api_cached_price, "API price per million cached input tokens"},
      {"input-per-output", &f->input_per_output, "Input tokens per output token in the API comparison"},
      {"cached-fraction", &f->cached_fraction, "Fraction of input tokens billed at the cached price, [0, 1]"},
      {"node-price", &f->node_price, "Buying: purchase price of one node"},
      {"gpus-per-node", &f->gpus_per_node, "Buying: GPUs per node (default 8)"},
      {"amortization-years", &f->amortization_years, "Buying: straight-line amortization (default 3)"},
      {"power-kw", &f->power_kw, "Buying: one node's power draw in kW"},
      {"power-price", &f->power_price, "Buying: electricity price per kWh"},
      {"ops-cost-month", &f->ops_cost_month, "Buying: the cluster's operating cost per 30-day month"},
  };
}

// Sets a flag's field from its --file value.
base::Status SetFromJson(const FlagSpec& spec, const Json& value) {
  const auto bad = [&] {
    return base::Error(base::ErrorCode::kInvalidArgument, fmt::format("--file: \"{}\" has the wrong type", spec.name));
  };
  if (auto* d = std::get_if<double*>(&spec.target)) {
    if (!value.is_number()) return bad();
    **d = value.get<double>();
  } else if (auto* i = std::get_if<int64_t*>(&spec.target)) {
    if (!value.is_number_integer()) return bad();
    **i = value.get<int64_t>();
  } else if (auto* v = std::get_if<std::vector<double>*>(&spec.target)) {
    (*v)->clear();
    for (const Json& x : value.is_array() ? value : Json::array({value})) {
      if (!x.is_number()) return bad();
      (*v)->push_back(x.get<double>());
    }
  } else {
    if (!value.is_string()) return bad();
    **std::get_if<std::string*>(&spec.target) = value.get<std::string>();
  }
  return base::Status::Ok();
}

// Reads --file: keys are flag names; a flag also given on the command line wins. Adds every
// name taken from the file to *given.
base::Status ReadPlanFile(const std::string& path, const std::vector<FlagSpec>& specs, std::set<std::string>* given) {
  auto text = base::ReadFileToString(path);
  if (!text.ok()) return text.error().WithContext("--file");
  Json doc = Json::parse(*text, nullptr, false);
  if (!doc.is_object())
    return base::Error(base::ErrorCode::kInvalidArgument, "--file " + path + ": not a JSON object");
  for (const auto& [key, value] : doc.items()) {
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs)
      if (key == s.name) spec = &s;
    if (spec == nullptr || key == "file")
      return base::Error(base::ErrorCode::kInvalidArgument, "--file: unknown key \"" + key + "\"");
    if (given->count(key)) continue;
    FS_RETURN_IF_ERROR(SetFromJson(*spec, value));
    given->insert(key);
  }
  return base::Status::Ok();
}

// Output tokens/s per decode GPU from `flashserve bench --json`.
base::Result<double> BenchRate(const std::string& path, int64_t bench_gpus) {
  auto text = base::ReadFileToString(path);
  if (!text.ok()) return text.error().WithContext("--from-bench");
  Json doc = Json::parse(*text, nullptr, false);
  const Json* rate = nullptr;
  if (doc.is_object() && doc.contains("results") && doc["results"].is_object() &&
      doc["results"].contains("output_token_throughput"))
    rate = &doc["results"]["output_token_throughput"];
  if (rate == nullptr || !rate->is_number())
    return base::Error(base::ErrorCode::kInvalidArgument,
                       "--from-bench " + path + ": no results.output_token_throughput (write it with flashserve bench --json)");
  if (bench_gpus < 1) return base::Error(base::ErrorCode::kInvalidArgument, "--bench-gpus must be >= 1");
  return rate->get<double>() / static_cast<double>(bench_gpus);
}

base::Result<meter::PlanInputs> InputsFrom(const PlanFlags& f, const std::set<std::string>& given) {
  const auto bad = [](std::string m) { return base::Error(base::ErrorCode::kInvalidArgument, std::move(m)); };
  meter::PlanInputs in;
  const bool single = given.count("gpus") || given.count("gpu-hour");
  if (single && (given.count("prefill-gpus") || given.count("decode-gpus") || given.count("prefill-gpu-hour") ||
                 given.count("decode-gpu-hour")))
    return bad("--gpus/--gpu-hour (one pool) and the --prefill-*/--decode-* pools exclude each other");
  in.prefill_gpus = single ? 0 : f.prefill_gpus;
  in.prefill_gpu_hour = single ? 0 : f.prefill_gpu_hour;
  in.decode_gpus = single ? f.gpus : f.decode_gpus;
  in.decode_gpu_hour = single ? f.gpu_hour : f.decode_gpu_hour;
  in.rent = given.count(single ? "gpu-hour" : "decode-gpu-hour") || given.count("prefill-gpu-hour");
  if (given.count("from-bench") && given.count("decode-tokens-per-gpu-s"))
    return bad("--from-bench and --decode-tokens-per-gpu-s exclude each other");
  in.decode_tokens_per_gpu_s = f.tokens_per_gpu_s;
  if (given.count("from-bench")) {
    auto rate = BenchRate(f.from_bench, f.bench_gpus);
    if (!rate.ok()) return rate.error();
    in.decode_tokens_per_gpu_s = *rate;
  }
  in.balance = f.balance;
  in.utilizations = f.utilizations;
  in.api_output_prices = f.api_output_prices;
  if (given.count("api-input-price")) in.api_input_price = f.api_input_price;
  in.api_cached_price = f.api_cached_price;
  in.input_per_output = f.input_per_output;
  in.cached_fraction = f.cached_fraction;
  const bool buying = given.count("node-price") || given.count("power-kw") || given.count("ops-cost-month");
  for (const char* only : {"gpus-per-node", "amortization-years", "power-price"})
    if (!buying && given.count(only))
      return bad(std::string("--") + only + " is for buying: give --node-price (and --power-kw, --ops-cost-month)");
  if (buying) {
    in.buy = meter::BuyInputs{f.node_price,  f.gpus_per_node, f.amortization_years,
                              f.power_kw,    f.power_price,   f.ops_cost_month};
  }
  return in;
}

// 1234567.8 -> "1,234,568".
std::string Grouped(double value) {
  const std::string digits = fmt::format("{:.0f}", std::fabs(value));
  std::string out = value < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Money(double value) {
  const double cents = std::round(value * 100);
  const double whole = std::trunc(cents / 100);
  return fmt::format("${}.{:02.0f}", Grouped(whole), std::fabs(cents - whole * 100));
}

std::string Percent(double fraction) { return fmt::format("{:.0f}%", fraction * 100); }
// A break-even utilization: above 100% the cluster never pays at that price.
std::string BreakEven(double fraction) { return fraction > 1 ? "never (" + Percent(fraction) + ")" : Percent(fraction); }

// 48,896,000,000 -> "48.90 B".
std::string Tokens(double n) {
  if (n >= 1e9) return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f} M", n / 1e6);
  return Grouped(n);
}

void PrintCostPlan(const meter::CostPlan& p, const meter::PlanResult& r) {
  std::printf("\n%s", p.mode == "rent" ? "Renting" : "Buying");
  if (p.nodes) std::printf(" (%lld nodes)", static_cast<long long>(*p.nodes));
  std::printf(": %s/hour  %s/day  %s/month (30 days)\n", Money(p.cost_per_hour).c_str(), Money(p.cost_per_day).c_str(),
              Money(p.cost_per_month).c_str());
  std::printf("  %-12s %16s %20s %16s\n", "utilization", "output tok/s", "output tok/day", "per M output");
  for (const meter::UtilizationRow& row : p.rows)
    std::printf("  %-12s %16s %20s %16s\n", Percent(row.utilization).c_str(), Grouped(row.output_tokens_per_s).c_str(),
                Grouped(row.output_tokens_per_day).c_str(), Money(row.cost_per_million_output).c_str());
  if (p.break_even.empty()) return;
  const bool mix = r.input_cost_per_million_output.has_value();
  std::printf("  break-even utilization against the API%s:\n",
              mix ? fmt::format(" (input side ${:.4g} per M output)", *r.input_cost_per_million_output).c_str() : "");
  std::printf("  %-14s %12s %14s %18s %18s\n", "API per M out", "output only", "with input", "API tokens/day",
              "API tokens/month");
  for (const meter::BreakEvenRow& b : p.break_even) {
    const double per_day = mix ? *b.api_output_tokens_per_cluster_day_with_input : b.api_output_tokens_per_cluster_day;
    const double per_month =
        mix ? *b.break_even_output_tokens_per_month_with_input : b.break_even_output_tokens_per_month;
    std::printf("  %-14s %12s %14s %18s %18s\n", Money(b.api_output_price).c_str(), BreakEven(b.utilization).c_str(),
                mix ? BreakEven(*b.utilization_with_input).c_str() : "-", Tokens(per_day).c_str(),
                Tokens(per_month).c_str());
  }
  std::printf("  (API tokens/day: output tokens a day's cluster cost buys from the API; /month: the break-even\n"
              "   output volume per 30-day month%s)\n",
              mix ? ", both with the input side" : "");
}

Json OptionalJson(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json PlanJson(const meter::PlanResult& r) {
  Json plans = Json::array();
  for (const meter::CostPlan& p : r.plans) {
    Json rows = Json::array(), breaks = Json::array();
    for (const meter::UtilizationRow& u : p.rows)
      rows.push_back({{"utilization", u.utilization}, {"output_tokens_per_s", u.output_tokens_per_s},
                      {"output_tokens_per_day", u.output_tokens_per_day},
                      {"cost_per_million_output", u.cost_per_million_output}});
    for (const meter::BreakEvenRow& b : p.break_even)
      breaks.push_back({{"api_output_price", b.api_output_price},
                        {"break_even_utilization", b.utilization},
                        {"api_price_with_input", OptionalJson(b.api_price_with_input)},
                        {"break_even_utilization_with_input", OptionalJson(b.utilization_with_input)},
                        {"api_output_tokens_per_cluster_day", b.api_output_tokens_per_cluster_day},
                        {"api_output_tokens_per_cluster_day_with_input",
                         OptionalJson(b.api_output_tokens_per_cluster_day_with_input)},
                        {"break_even_output_tokens_per_month", b.break_even_output_tokens_per_month},
                        {"break_even_output_tokens_per_month_with_input",
                         OptionalJson(b.break_even_output_tokens_per_month_with_input)}});
    plans.push_back({{"mode", p.mode},
                     {"nodes", p.nodes ? Json(*p.nodes) : Json(nullptr)},
                     {"cost_per_hour", p.cost_per_hour},
                     {"cost_per_day", p.cost_per_day},
                     {"cost_per_month", p.cost_per_month},
                     {"utilizations", std::move(rows)},
                     {"break_even", std::move(breaks)}});
  }
  return {{"gpus", r.gpus},
          {"capacity_output_tokens_per_s", r.capacity_output_tokens_per_s},
          {"input_cost_per_million_output", OptionalJson(r.input_cost_per_million_output)},
          {"plans", std::move(plans)}};
}

int RunPlan(PlanFlags* f, const std::vector<FlagSpec>& specs, std::set<std::string> given) {
  const auto fail = [](const base::Error& e) {
    std::fprintf(stderr, "flashserve plan: %s\n", e.message().c_str());
    return 2;
  };
  if (!f->file.empty()) {
    base::Status read = ReadPlanFile(f->file, specs, &given);
    if (!read.ok()) return fail(read.error());
  }
  auto inputs = InputsFrom(*f, given);
  if (!inputs.ok()) return fail(inputs.error());
  auto plan = meter::ComputePlan(*inputs);
  if (!plan.ok()) return fail(plan.error());
  if (f->json) {
    std::printf("%s\n", PlanJson(*plan).dump(2).c_str());
    return 0;
  }
  const meter::PlanInputs& in = *inputs;
  std::printf("Cluster: %lld GPUs (%lld prefill, %lld decode); capacity %s output tok/s = %s tok/s per decode GPU x %lld"
              " x %s balance\n",
              static_cast<long long>(plan->gpus), static_cast<long long>(in.prefill_gpus),
              static_cast<long long>(in.decode_gpus), Grouped(plan->capacity_output_tokens_per_s).c_str(),
              Grouped(in.decode_tokens_per_gpu_s).c_str(), static_cast<long long>(in.decode_gpus),
              Percent(in.balance).c_str());
  for (const meter::CostPlan& p : plan->plans) PrintCostPlan(p, *plan);
  return 0;
}

}  // namespace

void RegisterPlanCommand(CLI::App& app, CommandFn* run) {
  auto* cmd = app.add_subcommand("plan", "Cluster cost per million output tokens and break-even against API prices");
  auto flags = std::make_shared<PlanFlags>();
  auto specs = std::make_shared<std::vector<FlagSpec>>(Specs(flags.get()));
  for (const FlagSpec& s : *specs) {
    const std::string name = std::string("--") + s.name;
    std::visit(
        [&](auto* target) {
          auto* opt = cmd->add_option(name, *target, s.help);
          if constexpr (std::is_same_v<decltype(target), std::vector<double>*>) opt->delimiter(',');
        },
        s.target);
  }
  cmd->add_option("--file", flags->file, "JSON object of the same settings (keys: the flag names without --)");
  cmd->add_flag("--json", flags->json, "Print the figures as one JSON object (docs/planner.md)");
  cmd->callback([run, flags, specs, cmd] {
    std::set<std::string> given;
    for (const FlagSpec& s : *specs)
      if (cmd->get_option(std::string("--") + s.name)->count() > 0) given.insert(s.name);
    *run = [flags, specs, given] { return RunPlan(flags.get(), *specs, given); };
  });
}

}  // namespace flashserve::app
