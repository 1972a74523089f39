// Routing simulator: replays a Mooncake-style JSON-lines trace (--trace) or a synthetic multi-turn
// agent workload (--synthetic) against N simulated workers once per policy, with the router's real
// PrefixIndex, LoadView and Chooser, and prints hit rate, TTFT, load spread and decision latency.
// Measures and prints; asserts nothing.
//
//   route_sim --synthetic --sessions 8000 --turns 8 --workers 1000 [--write-trace FILE]
//   route_sim --trace FILE --workers 64 --policies cache-aware,round-robin,oracle
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "router/route_sim.h"
#include "router/trace.h"

namespace {

using namespace flashserve;

struct Flags {
  std::string trace_path, write_trace;
  bool synthetic = false;
  std::string policies = "round-robin,least-load,cache-aware,session-affinity,oracle";
  double queue_limit_s = 120;  // a worker with more queued prefill than this takes nothing
  router::AgentWorkload workload;
  router::SimOptions sim;
};

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void AddFlags(CLI::App& app, Flags* f) {
  auto* source = app.add_option_group("source");
  source->add_option("--trace", f->trace_path, "JSON-lines trace (timestamp ms, input_length, hash_ids, ...)");
  source->add_flag("--synthetic", f->synthetic, "Generate a multi-turn agent workload");
  source->require_option(1);
  app.add_option("--write-trace", f->write_trace, "Also write the (generated) trace to this file");
  app.add_option("--sessions", f->workload.sessions, "Synthetic: sessions")->check(CLI::PositiveNumber);
  app.add_option("--turns", f->workload.turns, "Synthetic: mean turns per session")->check(CLI::PositiveNumber);
  app.add_option("--tenants", f->workload.tenants, "Synthetic: tenants (system prompts)")->check(CLI::PositiveNumber);
  app.add_option("--system-blocks", f->workload.system_prompt_blocks, "Synthetic: mean system prompt blocks");
  app.add_option("--rate", f->workload.session_rate_per_s, "Synthetic: session starts per second");
  app.add_option("--think", f->workload.think_time_s, "Synthetic: mean think time between turns, s");
  app.add_option("--user-tokens", f->workload.turn_user_tokens, "Synthetic: mean new tokens per turn");
  app.add_option("--output-tokens", f->workload.output_tokens, "Synthetic: mean answer tokens");
  app.add_option("--seed", f->workload.seed, "Synthetic: random seed");
  app.add_option("--workers", f->sim.workers, "Simulated workers")->check(CLI::Range(1, 100000));
  app.add_option("--policies", f->policies, "Comma-separated: round-robin, least-load, cache-aware, "
                                            "session-affinity, oracle");
  app.add_option("--cache-blocks", f->sim.memory_blocks, "Memory (L1) capacity per worker, blocks");
  app.add_option("--disk-blocks", f->sim.disk_blocks, "Disk (L2) capacity per worker, blocks");
  app.add_option("--prefill-tps", f->sim.prefill_tokens_per_s, "Worker prefill speed, tokens/s");
  app.add_option("--decode-tps", f->sim.decode_tokens_per_s, "Decode speed per sequence, tokens/s");
  app.add_option("--poll", f->sim.poll_interval_s, "Load poll interval, s");
  app.add_option("--busy-window", f->sim.busy_window_s, "Window of the workers' busy fraction, s");
  app.add_option("--event-delay", f->sim.event_delay_s, "KV event delay, s");
  app.add_option("--boundary-every", f->sim.boundary_every_blocks, "Persist a boundary every N blocks");
  app.add_option("--tokens-per-id", f->sim.tokens_per_id, "Tokens per trace hash id (512 for Mooncake traces)");
  app.add_option("--index-cap", f->sim.index_entries_per_worker, "PrefixIndex entries per worker (0 = no cap)");
  app.add_option("--balance-abs", f->sim.chooser.balance_abs_threshold_s, "Imbalance bound: absolute, s of queue");
  app.add_option("--balance-rel", f->sim.chooser.balance_rel_threshold, "Imbalance bound: x least-loaded worker");
  app.add_option("--recompute-weight", f->sim.chooser.recompute_weight, "Cost weight of a request's own prefill");
  app.add_option("--decode-cost", f->sim.chooser.decode_seconds_per_sequence, "Cost per running sequence, s");
  app.add_option("--busy-weight", f->sim.chooser.busy_weight_tokens, "Cost of a fully busy worker, tokens");
  app.add_option("--session-table", f->sim.chooser.session_table_size, "Sessions remembered by the router (0 = off)");
  app.add_option("--tie-tolerance", f->sim.chooser.tie_tolerance, "Relative cost tolerance for affinity ties");
  app.add_option("--queue-limit", f->queue_limit_s, "Saturation: queued prefill seconds per worker");
}

int Run(Flags& f) {
  std::vector<router::TraceRequest> trace;
  const auto t0 = std::chrono::steady_clock::now();
  if (f.synthetic) {
    if (base::Status s = f.workload.Validate(); !s.ok()) {
      std::fprintf(stderr, "route_sim: %s\n", s.ToString().c_str());
      return 1;
    }
    trace = router::GenerateAgentTrace(f.workload);
  } else {
    auto read = router::ReadTrace(f.trace_path);
    if (!read.ok()) {
      std::fprintf(stderr, "route_sim: %s\n", read.error().ToString().c_str());
      return 1;
    }
    trace = std::move(read).value();
  }
  if (!f.write_trace.empty()) {
    if (base::Status s = router::WriteTrace(trace, f.write_trace); !s.ok()) {
      std::fprintf(stderr, "route_sim: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  f.sim.policies = SplitCommas(f.policies);
  f.sim.chooser.max_queued_prefill_tokens = static_cast<int64_t>(f.queue_limit_s * f.sim.prefill_tokens_per_s);
  auto report = router::RunRouteSim(trace, f.sim);
  if (!report.ok()) {
    std::fprintf(stderr, "route_sim: %s\n", report.error().ToString().c_str());
    return 1;
  }
  report->Print();
  std::printf("\nsimulated in %.1f s (", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (const router::PolicyReport& r : report->policies) std::printf(" %s %.1f s", r.policy.c_str(), r.wall_s);
  std::printf(" )\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Routing simulator: policies x simulated workers x a trace"};
  Flags flags;
  AddFlags(app, &flags);
  CLI11_PARSE(app, argc, argv);
  return Run(flags);
}
