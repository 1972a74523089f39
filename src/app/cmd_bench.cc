// `flashserve bench`: the serving benchmark client. Drives any OpenAI-compatible endpoint with a
// fixed concurrency, Poisson arrivals or a replayed trace and prints TTFT/TPOT/ITL/E2E
// percentiles, throughput, goodput, errors, rejects and prefix-cache hit rates (table, optionally JSON).
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
  double slo_ttft_ms = 2000;
  double slo_tpot_ms = 100;
  std::string json_path;
  bool json_requests = false;
  bool prefix_len_given = false;
  bool num_requests_given = false;
  bool endpoint_given = false;
};

base::Status ApplyFlags(BenchFlags& f) {
  FS_ASSIGN_OR_RETURN(f.dataset.kind, loadgen::ParseDatasetKind(f.dataset_name));
  const bool trace = f.dataset.kind == loadgen::DatasetKind::kTrace;
  // Trace prompts are token ids, which only /v1/completions takes.
  if (trace && !f.endpoint_given) f.endpoint = "completions";
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
  // A trace is replayed whole unless --num-requests limits it.
  if (trace && !f.num_requests_given) f.dataset.num_requests = 0;
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

// --slo-ttft-ms / --slo-tpot-ms (0 = no limit), then any --goodput KEY:MS on top.
base::Result<loadgen::GoodputLimits> GoodputFromFlags(const BenchFlags& f) {
  if (!(f.slo_ttft_ms >= 0) || !(f.slo_tpot_ms >= 0))
    return base::MakeError(base::ErrorCode::kInvalidArgument, "--slo-ttft-ms and --slo-tpot-ms must be >= 0");
  FS_ASSIGN_OR_RETURN(loadgen::GoodputLimits given, loadgen::ParseGoodput(f.goodput));
  loadgen::GoodputLimits limits;
  if (f.slo_ttft_ms > 0) limits.ttft_ms = f.slo_ttft_ms;
  if (f.slo_tpot_ms > 0) limits.tpot_ms = f.slo_tpot_ms;
  if (given.ttft_ms) limits.ttft_ms = given.ttft_ms;
  if (given.tpot_ms) limits.tpot_ms = given.tpot_ms;
  limits.e2el_ms = given.e2el_ms;
  return limits;
}

int RunBench(BenchFlags& f) {
  base::Status applied = ApplyFlags(f);
  if (!applied.ok()) return PrintError(applied.error());
  auto goodput = GoodputFromFlags(f);
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
  if (f.dataset.kind == loadgen::DatasetKind::kTrace)
    std::fprintf(stderr, "bench: trace of %lld requests, %lld prompts clipped to --max-input-len\n",
                 static_cast<long long>((*dataset)->num_jobs()), static_cast<long long>((*dataset)->num_clipped()));
  int64_t done = 0, failed = 0;
  double start = base::MonotonicSeconds(), last_print = start;
  auto run = loadgen::RunBenchmark(f.config, **dataset, [&](const loadgen::RequestRecord& r) {
    PrintProgress(r, &done, &failed, &last_print, start);
  });
  if (!run.ok()) return PrintError(run.error());
  loadgen::BenchReport report = loadgen::Aggregate(run->records, run->duration_s, *goodput, run->num_skipped);
  loadgen::RunInfo info{&f.config, &f.dataset, run->model, f.tokenizer, run->num_connections,
                        (*dataset)->num_jobs(), (*dataset)->num_clipped(), run->vision};
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
  auto* endpoint = cmd->add_option("--endpoint", f->endpoint,
                                   "chat (/v1/chat/completions) or completions (/v1/completions; the default for trace)")
                       ->check(CLI::IsMember({"chat", "completions"}))->capture_default_str();
  cmd->add_option("--model", c.model, "Model name sent (default: the first id from GET /v1/models)");
  cmd->add_option("--api-key", c.api_key, "Sent as Authorization: Bearer KEY");
  cmd->add_option("--temperature", c.temperature, "Sampling temperature")->capture_default_str();
  cmd->add_option("--sampling-seed", f->sampling_seed, "Sent as the request's \"seed\" (default: not sent)");
  cmd->add_flag("--ignore-eos", c.ignore_eos, "Send \"ignore_eos\": true so outputs run to max_tokens (vLLM-style servers)");
  cmd->add_option("--concurrency", c.concurrency,
                  "Closed loop: jobs kept in flight (default 1 without --request-rate); "
                  "trace: cap on requests in flight (default none)");
  cmd->add_option("--request-rate", f->request_rate, "Open loop: Poisson job arrivals per second (inf = all at once)");
  cmd->add_option("--max-concurrency", c.max_concurrency, "With --request-rate: cap on jobs in flight (0 = none)");
  auto* num_requests = cmd->add_option("--num-requests", d.num_requests,
                                       "Requests (random, shared-prefix; 0 = until --duration); "
                                       "trace: the first N (default all)")
                           ->capture_default_str();
  cmd->add_option("--duration", c.duration_s, "Seconds after which no new request starts (0 = none)");
  cmd->add_option("--seed", c.seed, "Seed of the dataset and the arrival times")->capture_default_str();
  cmd->add_option("--dataset", f->dataset_name, "random, shared-prefix, multi-turn or trace (needs --trace)")
      ->check(CLI::IsMember({"random", "shared-prefix", "multi-turn", "trace"}))->capture_default_str();
  cmd->add_option("--trace", d.trace_path,
                  "trace: JSON-lines trace (timestamp ms, input_length, output_length, hash_ids, session)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--trace-block-tokens", d.trace_block_tokens, "trace: tokens per hash id (512 in Mooncake's traces)")
      ->capture_default_str();
  cmd->add_option("--trace-vocab", d.trace_vocab, "trace: prompt token ids are drawn from [100, N)")->capture_default_str();
  cmd->add_option("--time-scale", c.time_scale, "trace: multiply the timestamps (0.5 = twice as fast, 0 = no waiting)")
      ->capture_default_str();
  cmd->add_option("--max-input-len", d.max_input_len, "trace: cut longer prompts to this many tokens (0 = no limit)")
      ->capture_default_str();
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
  cmd->add_option_function<std::string>(
         "--turn-image",
         [&d](const std::string& size) {
           const size_t x = size.find('x');
           if (x == std::string::npos) throw CLI::ValidationError("--turn-image", "expected WxH, e.g. 1280x720");
           d.turn_image_width = std::atoi(size.substr(0, x).c_str());
           d.turn_image_height = std::atoi(size.substr(x + 1).c_str());
         },
         "multi-turn: a new synthetic screenshot of WxH pixels with every user message (an agent's screenshot per "
         "turn; chat endpoint); the report adds the server's tower time from its /metrics");
  cmd->add_option("--slo-ttft-ms", f->slo_ttft_ms, "Goodput SLO on time to first token (0 = none)")->capture_default_str();
  cmd->add_option("--slo-tpot-ms", f->slo_tpot_ms, "Goodput SLO on time per output token (0 = none)")->capture_default_str();
  cmd->add_option("--goodput", f->goodput,
                  "SLO limits in ms overriding the --slo flags, e.g. --goodput ttft:500 e2el:9000 (keys ttft, tpot, e2el)");
  cmd->add_flag("--honor-retry-after", c.honor_retry_after, "Retry a 429 after its Retry-After (else it is a reject)");
  cmd->add_option("--max-retries", c.max_retries, "With --honor-retry-after: retries per request")->capture_default_str();
  cmd->add_option("--timeout", c.timeout_s, "Seconds a connect, read or write may take")->capture_default_str();
  cmd->add_option("--json", f->json_path, "Also write the results and parameters as JSON to FILE");
  cmd->add_flag("--json-requests", f->json_requests, "With --json: include every request's measurements");
  cmd->callback([f, run, prefix, num_requests, endpoint] {
    f->prefix_len_given = prefix->count() > 0;
    f->num_requests_given = num_requests->count() > 0;
    f->endpoint_given = endpoint->count() > 0;
    *run = [f] { return RunBench(*f); };
  });
}

}  // namespace flashserve::app
