// `flashserve bench`: the serving benchmark client. Drives any OpenAI-compatible endpoint with a
// fixed concurrency or Poisson arrivals and prints TTFT/TPOT/ITL/E2E percentiles, throughput,
// goodput, errors, rejects and prefix-cache hit rates (table, optionally JSON).
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/clock.h"
#include "base/file_util.h"
#include "loadgen/dataset.h"
#include "loadgen/metrics.h"
#include "loadgen/report.h"
#include "loadgen/runner.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::app {

namespace {
struct BenchFlags {
  loadgen::BenchConfig config;
  loadgen::DatasetConfig dataset;
  std::string dataset_name = "random";
  std::string endpoint = "chat";
  std::string request_rate;  // text, so "inf" works
  int64_t sampling_seed = -1;
  std::string tokenizer;
  std::vector<std::string> goodput;
  std::string json_path;
  bool json_requests = false;
  bool prefix_len_given = false;
  bool num_requests_given = false;
};

base::Status ApplyFlags(BenchFlags& f) {
  FS_ASSIGN_OR_RETURN(f.dataset.kind, loadgen::ParseDatasetKind(f.dataset_name));
  f.config.api = f.endpoint == "completions" ? loadgen::ApiKind::kCompletions : loadgen::ApiKind::kChat;
  if (!f.request_rate.empty()) {
    char* end = nullptr;
    f.config.request_rate = std::strtod(f.request_rate.c_str(), &end);
    if (*end != '\0' || !(f.config.request_rate > 0))
      return base::MakeError(base::ErrorCode::kInvalidArgument, "--request-rate: a positive number or inf");
  }
  if (f.sampling_seed >= 0) f.config.sampling_seed = static_cast<uint64_t>(f.sampling_seed);
  // Multi-turn conversations get a system prompt only when --prefix-len is given.
  if (f.dataset.kind == loadgen::DatasetKind::kMultiTurn && !f.prefix_len_given) f.dataset.prefix_len = 0;
  f.dataset.seed = f.config.seed;
  // A duration without an explicit request count runs until the deadline.
  if (f.config.duration_s > 0 && !f.num_requests_given) f.dataset.num_requests = 0;
  FS_RETURN_IF_ERROR(f.dataset.Validate());
  return f.config.Validate();
}

void PrintProgress(const loadgen::RequestRecord& r, int64_t* done, int64_t* failed, double* last_print,
                   double start) {
  ++*done;
  if (r.outcome != loadgen::Outcome::kOk) ++*failed;
  double now = base::MonotonicSeconds();
  if (now - *last_print < 5.0) return;
  *last_print = now;
  std::fprintf(stderr, "bench: %lld requests done (%lld failed) after %.1f s\n", static_cast<long long>(*done),
               static_cast<long long>(*failed), now - start);
}

int RunBench(BenchFlags& f) {
  base::Status applied = ApplyFlags(f);
  if (!applied.ok()) return PrintError(applied.error());
  auto goodput = loadgen::ParseGoodput(f.goodput);
  if (!goodput.ok()) return PrintError(goodput.error());
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!f.tokenizer.empty()) {
    auto loaded = tokenizer::Tokenizer::Load(f.tokenizer);
    if (!loaded.ok()) return PrintError(loaded.error());
    tok = std::move(loaded).value();
  }
  auto dataset = loadgen::Dataset::Create(f.dataset, tok.get());
  if (!dataset.ok()) return PrintError(dataset.error());
  std::fprintf(stderr, "bench: %s dataset against %s%s\n", std::string(loadgen::DatasetKindName(f.dataset.kind)).c_str(),
               f.config.base_url.c_str(), std::string(loadgen::ApiPath(f.config.api)).c_str());
  int64_t done = 0, failed = 0;
  double start = base::MonotonicSeconds(), last_print = start;
  auto run = loadgen::RunBenchmark(f.config, **dataset, [&](const loadgen::RequestRecord& r) {
    PrintProgress(r, &done, &failed, &last_print, start);
  });
  if (!run.ok()) return PrintError(run.error());
  loadgen::BenchReport report = loadgen::Aggregate(run->records, run->duration_s, *goodput, run->num_skipped);
  loadgen::RunInfo info{&f.config, &f.dataset, run->model, f.tokenizer, run->num_connections};
  std::fputs(loadgen::FormatTable(report, info).c_str(), stdout);
  if (!f.json_path.empty()) {
    std::string json = loadgen::ReportJson(report, info, f.json_requests ? &run->records : nullptr);
    base::Status written = base::WriteFileAtomic(f.json_path, json);
    if (!written.ok()) return PrintError(written.error());
  }
  // Exit status 1 when nothing completed (a dead endpoint); failures alone are results.
  return report.num_completed > 0 ? 0 : 1;
}
}  // namespace

void RegisterBenchCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<BenchFlags>();
  loadgen::BenchConfig& c = f->config;
  loadgen::DatasetConfig& d = f->dataset;
  auto* cmd = app.add_subcommand("bench", "Serving benchmark client for any OpenAI-compatible endpoint");
  cmd->add_option("--base-url", c.base_url, "Server URL (http://host:port; a trailing /v1 is accepted)")->capture_default_str();
  cmd->add_option("--endpoint", f->endpoint, "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->check(CLI::IsMember({"chat", "completions"}))->capture_default_str();
  cmd->add_option("--model", c.model, "Model name sent (default: the first id from GET /v1/models)");
  cmd->add_option("--api-key", c.api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--temperature", c.temperature, "Sampling temperature")->capture_default_str();
  cmd->add_option("--sampling-seed", f->sampling_seed, "Sent as the request's \"seed\" (default: not sent)");
  cmd->add_flag("--ignore-eos", c.ignore_eos, "Send \"ignore_eos\": true so outputs run to max_tokens (vLLM-style servers)");
  cmd->add_option("--concurrency", c.concurrency, "Closed loop: jobs kept in flight (default 1 without --request-rate)");
  cmd->add_option("--request-rate", f->request_rate, "Open loop: Poisson job arrivals per second (inf = all at once)");
  cmd->add_option("--max-concurrency", c.max_concurrency, "With --request-rate: cap on jobs in flight (0 = none)");
  auto* num_requests = cmd->add_option("--num-requests", d.num_requests, "Requests (random, shared-prefix); 0 = until --duration")->capture_default_str();
  cmd->add_option("--duration", c.duration_s, "Seconds after which no new request starts (0 = none)");
  cmd->add_option("--seed", c.seed, "Seed of the dataset and the arrival times")->capture_default_str();
  cmd->add_option("--dataset", f->dataset_name, "random, shared-prefix or multi-turn")
      ->check(CLI::IsMember({"random", "shared-prefix", "multi-turn"}))->capture_default_str();
  cmd->add_option("--tokenizer", f->tokenizer, "tokenizer.json: lengths in exact tokens (default: words, ~1 token each)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--input-len", d.input_len, "random: prompt length")->capture_default_str();
  cmd->add_option("--output-len,--max-tokens", d.output_len, "max_tokens of every request")->capture_default_str();
  cmd->add_option("--range-ratio", d.range_ratio, "random: lengths uniform in len * [1-r, 1+r]")->capture_default_str();
  cmd->add_option("--num-prefixes", d.num_prefixes, "shared-prefix: distinct system prompts")->capture_default_str();
  auto* prefix = cmd->add_option("--prefix-len", d.prefix_len, "shared-prefix: system prompt length (multi-turn: adds one)")
                     ->capture_default_str();
  cmd->add_option("--suffix-len", d.suffix_len, "shared-prefix: user message length")->capture_default_str();
  cmd->add_option("--num-conversations", d.num_conversations, "multi-turn: conversations")->capture_default_str();
  cmd->add_option("--turns", d.turns, "multi-turn: turns per conversation")->capture_default_str();
  cmd->add_option("--turn-len", d.turn_len, "multi-turn: user message length per turn")->capture_default_str();
  cmd->add_option("--goodput", f->goodput, "SLO limits in ms, e.g. --goodput ttft:2000 tpot:50 (keys ttft, tpot, e2el)");
  cmd->add_flag("--honor-retry-after", c.honor_retry_after, "Retry a 429 after its Retry-After (else it is a reject)");
  cmd->add_option("--max-retries", c.max_retries, "With --honor-retry-after: retries per request")->capture_default_str();
  cmd->add_option("--timeout", c.timeout_s, "Seconds a connect, read or write may take")->capture_default_str();
  cmd->add_option("--json", f->json_path, "Also write the results and parameters as JSON to FILE");
  cmd->add_flag("--json-requests", f->json_requests, "With --json: include every request's measurements");
  cmd->callback([f, run, prefix, num_requests] {
    f->prefix_len_given = prefix->count() > 0;
    f->num_requests_given = num_requests->count() > 0;
    *run = [f] { return RunBench(*f); };
  });
}

}  // namespace flashserve::app
