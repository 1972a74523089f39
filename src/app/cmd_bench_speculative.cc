// `flashserve bench-speculative`: the machinery of speculative decoding measured apart from the
// drafter's skill. (1) The verify cost curve: engine step time with 1 + K rows per sequence
// (logged, then rolled back to one row so contexts stay put) against 1 row, per batch size.
// (2) End to end through the serving loop with an oracle drafter (each draft the recorded plain
// greedy continuation's token with probability a, else a wrong one): tokens/s against
// speculation off, outputs checked equal; then the same with the checkpoint's drafter, its MTP
// block or DSpark stages (on
// random weights it drafts almost nothing worth keeping: what speculating costs when it cannot
// pay). Prints numbers; asserts nothing but the equality.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include "app/cli_util.h"
#include "app/commands.h"
#include "serve/engine_loop.h"

namespace flashserve::app {
namespace {

struct SpecBenchFlags {
  std::string model;
  std::string batches = "1,8,32";
  std::string accept = "0.6,0.75,0.9,1.0";
  int context = 256, steps = 6, max_draft = 7, draft_tokens = 3, tokens = 64;
  bool no_qat = false;
  engine::EngineOptions options;
};

std::string RequestId(int i) {
  std::string id = "r";
  id += std::to_string(i);
  return id;
}

// Mean seconds of a step where every sequence verifies 1 + k rows.
double VerifyStep(engine::Engine& engine, std::vector<std::unique_ptr<engine::SequenceState>>& states, int k, int steps) {
  const int64_t vocab = engine.model().config().vocab_size;
  double total = 0;
  for (int step = 0; step < steps + 1; ++step) {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<engine::UndoLog> logs(states.size());
    std::vector<engine::ForwardRequest> reqs;
    for (size_t i = 0; i < states.size(); ++i) tokens.push_back(RandomTokenIds(k + 1, vocab, static_cast<uint32_t>(step * 977 + i)));
    for (size_t i = 0; i < states.size(); ++i) {
      reqs.push_back({states[i].get(), tokens[i], engine::LogitsMode::kAll});
      reqs.back().undo = &logs[i];
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto result = engine.Forward(reqs);
    FS_CHECK(result.ok(), "verify step failed");
    engine.Recycle(std::move(*result));  // as the serving loop does
    for (size_t i = 0; i < states.size(); ++i) FS_CHECK(engine.Rollback(states[i].get(), logs[i], 1).ok(), "rollback failed");
    if (step > 0) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return total / steps;
}

// Mean seconds of one call of the checkpoint's drafter for every sequence, k drafts each.
double DraftCall(engine::Engine& engine, std::vector<std::unique_ptr<engine::SequenceState>>& states, int k, int steps) {
  std::vector<engine::DraftRequest> batch;
  for (size_t i = 0; i < states.size(); ++i) batch.push_back({states[i].get(), static_cast<int32_t>(7 + i), k});
  double total = 0;
  for (int step = 0; step < steps + 1; ++step) {
    std::vector<std::vector<float>> confidence;
    const auto t0 = std::chrono::steady_clock::now();
    FS_CHECK(engine.Draft(batch, &confidence).ok(), "drafting failed");
    if (step > 0) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return total / steps;
}

void VerifyCurve(const engine::Model& model, const SpecBenchFlags& f, const std::vector<int32_t>& batches) {
  engine::Engine engine(model, f.options);
  std::printf("verify cost: ms per step with 1 + K rows per sequence (context %d), and its ratio to K = 0\n%-8s", f.context, "batch");
  for (int k = 0; k <= f.max_draft; ++k) std::printf("      K=%d", k);
  std::printf("\n");
  for (int32_t batch : batches) {
    std::vector<std::unique_ptr<engine::SequenceState>> states;
    for (int64_t i = 0; i < batch; ++i) {
      states.push_back(engine.NewSequence(true));
      const std::vector<int32_t> ctx = RandomTokenIds(f.context, model.config().vocab_size, static_cast<uint32_t>(100 + i));
      engine::ForwardRequest req{states.back().get(), ctx, engine::LogitsMode::kNone};
      FS_CHECK(engine.Forward({&req, 1}).ok(), "context prefill failed");
    }
    std::vector<double> ms;
    for (int k = 0; k <= f.max_draft; ++k) ms.push_back(VerifyStep(engine, states, k, f.steps) * 1e3);
    std::printf("%-8lld", static_cast<long long>(batch));
    for (double m : ms) std::printf(" %8.2f", m);
    std::printf("\n%-8s", "  ratio");
    for (double m : ms) std::printf(" %8.2f", m / ms[0]);
    const int k = std::min(f.draft_tokens, engine.MostDrafts());
    const double draft_ms = DraftCall(engine, states, k, f.steps) * 1e3;
    std::printf("\n  drafter (%s, K = %d): %.2f ms a call, %.2f of a K = 0 step\n",
                model.config().dspark.present() ? "DSpark" : "MTP", k, draft_ms, draft_ms / ms[0]);
  }
}

struct LoopRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  double seconds = 0;
  int64_t drafted = 0, accepted = 0, generated = 0;
};

LoopRun RunLoop(const engine::Model& model, const SpecBenchFlags& f, const serve::SpeculativeConfig& spec, int batch) {
  serve::LoopConfig c;
  c.speculative = spec;
  c.prefix_cache_bytes = 0;
  serve::EngineLoop loop(model, f.options, c);
  LoopRun out;
  int done = 0;
  for (int i = 0; i < batch; ++i) {
    protocol::GenerateRequest r;
    r.id = RequestId(i);
    r.prompt = RandomTokenIds(f.context, model.config().vocab_size, static_cast<uint32_t>(500 + i));
    r.max_tokens = f.tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    std::vector<int32_t>* sink = &out.tokens[r.id];
    FS_CHECK(loop.Submit(r, [sink, &done](const protocol::GenerateEvent& e) {
      for (const auto& t : e.tokens) sink->push_back(t.token);
      done += e.request_done;
    }).ok(), "submit failed");
  }
  // The prompts first (not timed), then decoding to the end.
  while (done < batch) {
    bool decoding = true;
    for (const auto& [id, t] : out.tokens) decoding = decoding && !t.empty();
    if (decoding) break;
    loop.StepOnce();
  }
  const auto t0 = std::chrono::steady_clock::now();
  int64_t before = 0;
  for (const auto& [id, t] : out.tokens) before += static_cast<int64_t>(t.size());
  while (done < batch) loop.StepOnce();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& [id, t] : out.tokens) out.generated += static_cast<int64_t>(t.size());
  out.generated -= before;
  const serve::ServiceStats s = loop.Stats();
  out.drafted = s.speculative_drafted;
  out.accepted = s.speculative_accepted;
  return out;
}

void PrintRun(int32_t batch, const char* drafter, bool adaptive, const LoopRun& off, const LoopRun& on) {
  const double off_tps = off.generated / off.seconds, on_tps = on.generated / on.seconds;
  std::printf("%-8d %-6s %-9s %12.1f %12.1f %7.2fx %10lld %9.1f%% %8s\n", batch, drafter, adaptive ? "adaptive" : "fixed",
              off_tps, on_tps, on_tps / off_tps, static_cast<long long>(on.drafted),
              on.drafted ? 100.0 * on.accepted / on.drafted : 0.0, on.tokens == off.tokens ? "yes" : "NO");
}

void OracleRuns(const engine::Model& model, const SpecBenchFlags& f, const std::vector<int32_t>& batches,
                const std::vector<double>& rates) {
  std::printf("\nend to end, greedy, K = %d, %d tokens per request, context %d: tokens/s with oracle drafts accepted at\n"
              "rate a, and with the checkpoint's drafter (its drafting cost included)\n", f.draft_tokens,
              f.tokens, f.context);
  std::printf("%-8s %-6s %-9s %12s %12s %8s %10s %10s %8s\n", "batch", "drafts", "budget", "off tok/s", "spec tok/s", "speedup",
              "drafted", "accepted", "equal");
  for (int32_t batch : batches) {
    const LoopRun off = RunLoop(model, f, {}, static_cast<int>(batch));
    std::map<std::vector<int32_t>, std::vector<int32_t>> runs;  // prompt -> plain output
    for (int64_t i = 0; i < batch; ++i) {
      std::vector<int32_t> prompt = RandomTokenIds(f.context, model.config().vocab_size, static_cast<uint32_t>(500 + i));
      runs[prompt] = off.tokens.at(RequestId(static_cast<int>(i)));
    }
    for (double a : rates) {
      for (bool adaptive : {false, true}) {
        auto rng = std::make_shared<std::mt19937>(17);
        serve::SpeculativeConfig spec;
        spec.num_draft_tokens = f.draft_tokens;
        spec.adaptive = adaptive;
        spec.external = [&runs, a, rng, ctx = f.context, vocab = model.config().vocab_size](std::span<const int32_t> tokens, int k) {
          std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + ctx);
          const std::vector<int32_t>& plain = runs.at(prompt);
          std::vector<int32_t> drafts;
          std::uniform_real_distribution<double> u(0, 1);
          for (size_t i = tokens.size() - ctx; i < plain.size() && static_cast<int>(drafts.size()) < k; ++i)
            drafts.push_back(u(*rng) < a ? plain[i] : static_cast<int32_t>((plain[i] + 1) % vocab));
          return drafts;
        };
        char label[16];
        std::snprintf(label, sizeof(label), "%.2f", a);
        PrintRun(batch, label, adaptive, off, RunLoop(model, f, spec, static_cast<int>(batch)));
      }
    }
    const model::DsparkConfig& dspark = model.config().dspark;
    for (bool adaptive : {false, true}) {  // the checkpoint's own drafter, drafting cost included
      serve::SpeculativeConfig spec;
      spec.drafter = true;
      spec.num_draft_tokens = dspark.present() ? std::min(f.draft_tokens, dspark.block_size) : f.draft_tokens;
      spec.adaptive = adaptive;
      PrintRun(batch, dspark.present() ? "dspark" : "mtp", adaptive, off, RunLoop(model, f, spec, static_cast<int>(batch)));
    }
  }
}

int RunSpecBench(SpecBenchFlags f) {
  f.options.qat = !f.no_qat;
  auto model = LoadModelOrPrint(f.model, f.options);
  if (!model) return 1;
  if (model->config().num_drafter_layers() == 0) {
    std::fprintf(stderr, "bench-speculative needs a checkpoint with a drafter (an MTP block or DSpark stages)\n");
    return 1;
  }
  auto batches = ParseTokenList(f.batches);  // ints
  if (!batches.ok()) return PrintError(batches.error());
  std::vector<double> rates;
  for (size_t at = 0; at < f.accept.size();) {
    const size_t comma = f.accept.find(',', at);
    rates.push_back(std::stod(f.accept.substr(at, comma - at)));
    at = comma == std::string::npos ? f.accept.size() : comma + 1;
  }
  VerifyCurve(*model, f, *batches);
  OracleRuns(*model, f, *batches, rates);
  return 0;
}

}  // namespace

void RegisterBenchSpeculativeCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<SpecBenchFlags>();
  auto* cmd = app.add_subcommand("bench-speculative",
                                 "Speculative decoding's verify cost curve and oracle-drafter speedup against speculation off");
  cmd->add_option("--model", f->model, "Checkpoint directory (with an MTP block or DSpark stages)")->required();
  cmd->add_option("--batches", f->batches, "Batch sizes, e.g. 1,8,32")->capture_default_str();
  cmd->add_option("--accept", f->accept, "Oracle acceptance rates, e.g. 0.6,0.75,0.9,1.0")->capture_default_str();
  cmd->add_option("--context", f->context, "Prompt tokens per sequence")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--steps", f->steps, "Timed steps per verify width")->check(CLI::Range(1, 10000))->capture_default_str();
  cmd->add_option("--max-draft", f->max_draft, "Largest K of the cost curve")->check(CLI::Range(0, 16))->capture_default_str();
  cmd->add_option("--num-draft-tokens", f->draft_tokens, "K of the end-to-end runs")->check(CLI::Range(1, 16))->capture_default_str();
  cmd->add_option("--tokens", f->tokens, "Tokens generated per request end to end")->check(CLI::Range(2, 100000))->capture_default_str();
  AddEngineFlags(cmd, &f->options, &f->no_qat);
  cmd->callback([f, run] { *run = [f] { return RunSpecBench(*f); }; });
}

}  // namespace flashserve::app
