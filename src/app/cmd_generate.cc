// `flashserve generate`: greedy decoding from a token prompt (developer tool).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "app/cli_util.h"
#include "app/commands.h"
#include "engine/engine.h"

namespace flashserve::app {

namespace {
struct GenerateFlags {
  std::string model, tokens, tokens_file;
  int num_tokens = 16;
  bool no_qat = false, stop_at_eos = true;
  engine::EngineOptions options;
};

int32_t Argmax(const float* row, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

int RunGenerate(GenerateFlags f) {
  auto prompt = TokensFromFlags(f.tokens, f.tokens_file);
  if (!prompt.ok()) return PrintError(prompt.error());
  auto model = LoadModelOrPrint(f.model, f.options);
  if (!model) return 1;
  f.options.qat = !f.no_qat;
  engine::Engine engine(*model, f.options);
  auto state = engine.NewSequence();
  const int64_t vocab = model->config().vocab_size;
  auto t0 = std::chrono::steady_clock::now();
  engine::ForwardRequest req{state.get(), *prompt, engine::LogitsMode::kLast};
  auto r = engine.Forward({&req, 1});
  if (!r.ok()) return PrintError(r.error());
  auto t1 = std::chrono::steady_clock::now();
  std::vector<int32_t> out;
  int32_t next = Argmax(r->row(0, 0), vocab);
  for (int i = 0; i < f.num_tokens; ++i) {
    out.push_back(next);
    if (f.stop_at_eos && next == model->config().eos_token_id) break;
    if (i + 1 == f.num_tokens) break;
    engine::ForwardRequest step{state.get(), std::span<const int32_t>(&next, 1), engine::LogitsMode::kLast};
    auto s = engine.Forward({&step, 1});
    if (!s.ok()) return PrintError(s.error());
    next = Argmax(s->row(0, 0), vocab);
    engine.Recycle(std::move(*s));
  }
  auto t2 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? "," : "", out[i]);
  std::printf("\n");
  double prefill = std::chrono::duration<double>(t1 - t0).count(), decode = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "prompt %zu tokens in %.3f s (%.1f tok/s); %zu generated in %.3f s (%.1f tok/s)\n", prompt->size(),
               prefill, prompt->size() / prefill, out.size(), decode, out.size() > 1 ? (out.size() - 1) / decode : 0.0);
  return 0;
}
}  // namespace

void RegisterGenerateCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<GenerateFlags>();
  auto* cmd = app.add_subcommand("generate", "Greedy decoding from token ids (prints the generated ids)");
  cmd->add_option("--model", f->model, "Checkpoint directory")->required();
  cmd->add_option("--tokens", f->tokens, "Prompt token ids, e.g. 0,5,17");
  cmd->add_option("--tokens-file", f->tokens_file, "File of prompt token ids");
  cmd->add_option("-n,--num-tokens", f->num_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("!--ignore-eos", f->stop_at_eos, "Keep generating after the end-of-sequence token");
  AddEngineFlags(cmd, &f->options, &f->no_qat);
  cmd->callback([f, run] { *run = [f] { return RunGenerate(*f); }; });
}

}  // namespace flashserve::app
