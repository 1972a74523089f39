// `flashserve logits`: runs a token sequence through the engine (one-shot, chunked or token by
// token) and writes the logits as float32 little-endian rows [positions x vocab].
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/file_util.h"
#include "engine/engine.h"

namespace flashserve::app {

namespace {
struct LogitsFlags {
  std::string model, tokens, tokens_file, out, positions = "all";
  int chunk = 0;
  bool mtp = false, no_qat = false;
  int top = 5;
  engine::EngineOptions options;
};

void PrintTop(const float* row, int64_t vocab, int top, int64_t pos) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  top = static_cast<int>(std::min<int64_t>(top, vocab));
  std::partial_sort(ids.begin(), ids.begin() + top, ids.end(),
                    [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  std::printf("pos %ld:", static_cast<long>(pos));
  for (int i = 0; i < top; ++i) std::printf(" %d (%.4f)", ids[i], row[ids[i]]);
  std::printf("\n");
}

int RunLogits(LogitsFlags f) {
  auto tokens = TokensFromFlags(f.tokens, f.tokens_file);
  if (!tokens.ok()) return PrintError(tokens.error());
  auto model = LoadModelOrPrint(f.model, f.options);
  if (!model) return 1;
  f.options.qat = !f.no_qat;
  engine::Engine engine(*model, f.options);
  auto state = engine.NewSequence(f.mtp);
  if (f.mtp && (!state->with_mtp() || model->config().num_mtp_layers == 0))
    return PrintError(base::Error(base::ErrorCode::kFailedPrecondition,
                                  model->config().dspark.present() ? "the model drafts with DSpark stages, not an MTP layer"
                                                                   : "the model has no MTP layer"));
  const int64_t n = static_cast<int64_t>(tokens->size());
  const int64_t chunk = f.chunk > 0 ? f.chunk : n;
  std::vector<float> rows;
  std::vector<int64_t> row_pos;
  for (int64_t done = 0; done < n; done += chunk) {
    const int64_t len = std::min(chunk, n - done);
    const bool last_chunk = done + len == n;
    engine::ForwardRequest req{state.get(), std::span<const int32_t>(tokens->data() + done, len),
                               f.positions == "all" ? engine::LogitsMode::kAll
                               : last_chunk         ? engine::LogitsMode::kLast
                                                    : engine::LogitsMode::kNone,
                               f.mtp};
    auto r = engine.Forward({&req, 1});
    if (!r.ok()) return PrintError(r.error());
    const std::vector<float>& src = f.mtp ? r->mtp_logits : r->logits;
    const int64_t count = static_cast<int64_t>(src.size()) / r->vocab_size;
    const int64_t first = f.mtp ? r->mtp_first_pos[0] : (f.positions == "all" ? done : n - 1);
    if (f.mtp && f.positions == "last" && !last_chunk) continue;
    const int64_t skip = (f.mtp && f.positions == "last") ? std::max<int64_t>(0, count - 1) : 0;
    rows.insert(rows.end(), src.begin() + skip * r->vocab_size, src.end());
    for (int64_t i = skip; i < count; ++i) row_pos.push_back(first + i);
  }
  const int64_t vocab = model->config().vocab_size;
  base::Status s = base::WriteFileAtomic(f.out, std::string_view(reinterpret_cast<const char*>(rows.data()),
                                                                   rows.size() * sizeof(float)));
  if (!s.ok()) return PrintError(s.error());
  for (size_t i = 0; f.top > 0 && i < row_pos.size(); ++i) PrintTop(rows.data() + i * vocab, vocab, f.top, row_pos[i]);
  std::fprintf(stderr, "wrote %zu rows x %ld to %s\n", row_pos.size(), static_cast<long>(vocab), f.out.c_str());
  return 0;
}
}  // namespace

void RegisterLogitsCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<LogitsFlags>();
  auto* cmd = app.add_subcommand("logits", "Run token ids through the model and write float32 logits");
  cmd->add_option("--model", f->model, "Checkpoint directory")->required();
  cmd->add_option("--tokens", f->tokens, "Token ids, e.g. 0,5,17");
  cmd->add_option("--tokens-file", f->tokens_file, "File of token ids (commas or whitespace)");
  cmd->add_option("--positions", f->positions, "all: a row per position; last: only the last")
      ->check(CLI::IsMember({"all", "last"}));
  cmd->add_option("--chunk", f->chunk, "Feed N tokens per forward call (1 = token-by-token decode; default one-shot)")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_flag("--mtp", f->mtp, "Write the MTP head's logits (position t predicts token t+2)");
  cmd->add_option("--out", f->out, "Output file (float32 little-endian, rows x vocab)")->required();
  cmd->add_option("--top", f->top, "Top ids printed per position")->check(CLI::Range(0, 100));
  AddEngineFlags(cmd, &f->options, &f->no_qat);
  cmd->callback([f, run] { *run = [f] { return RunLogits(*f); }; });
}

}  // namespace flashserve::app
