// `flashserve make-model`: writes a random-weight checkpoint in the official V4 layout.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/thread_pool.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "tokenizer/engram_map.h"

namespace flashserve::app {

namespace {
struct MakeModelFlags {
  std::string preset = "tiny";
  std::string out;
  uint64_t seed = 1234;
  std::string weights = "fp8";
  std::string tokenizer;
  int64_t vocab = 0;
  int threads = 0;
};

int RunMakeModel(MakeModelFlags f) {
  auto config = model::PresetByName(f.preset);
  if (!config.ok()) return PrintError(config.error());
  if (f.vocab > 0) config->vocab_size = f.vocab;
  if (config->dspark.present() && config->dspark.noise_token_id >= config->vocab_size)
    config->dspark.noise_token_id = config->vocab_size - 1;  // a smaller vocabulary's last id
  if (base::Status s = FitEngramToTokenizer(&*config, &f.tokenizer); !s.ok()) return PrintError(s.error());
  model::RandomCheckpointOptions opt;
  opt.seed = f.seed;
  opt.bf16 = f.weights == "bf16";
  base::ThreadPool pool(f.threads);
  auto start = std::chrono::steady_clock::now();
  base::Status s = model::WriteRandomCheckpoint(*config, f.out, opt, pool);
  if (!s.ok()) return PrintError(s.error());
  if (!f.tokenizer.empty()) {
    std::error_code ec;
    std::filesystem::copy_file(f.tokenizer, f.out + "/tokenizer.json", std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return PrintError(base::Error(base::ErrorCode::kIoError, "copying tokenizer: " + ec.message()));
  }
  uint64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(f.out))
    if (e.is_regular_file()) bytes += e.file_size();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: preset %s, %s weights, seed %llu, %.1f MB in %.1f s\n", f.out.c_str(), f.preset.c_str(),
              opt.bf16 ? "BF16" : "FP8 dense + FP4 experts", static_cast<unsigned long long>(f.seed), bytes / 1e6, secs);
  return 0;
}
}  // namespace

void RegisterMakeModelCommand(CLI::App& app, CommandFn* run) {
  auto flags = std::make_shared<MakeModelFlags>();
  auto* cmd = app.add_subcommand("make-model", "Write a random-weight DeepSeek-V4 or V4.1 checkpoint in the official layout");
  cmd->add_option("--preset", flags->preset,
                  "tiny (all V4 layer types + MTP), medium (~1.5 GB, for benchmarks), tiny-dspark / medium-dspark "
                  "(three DSpark stages instead of the MTP block, as V4-Flash-0731), their DeepSeek-V4.1 "
                  "siblings tiny-v41 / medium-v41, tower-v41 (tiny-v41 with the released vision tower), or "
                  "tiny-vision-exp (tiny with a small tower, laid out as V4-Flash-Vision-Exp)")
      ->check(CLI::IsMember(model::PresetNames()));
  cmd->add_option("--out", flags->out, "Output directory")->required();
  cmd->add_option("--seed", flags->seed, "Random seed (same seed = same bytes)");
  cmd->add_option("--weights", flags->weights, "fp8 (FP8 dense + FP4 experts, as released) or bf16")
      ->check(CLI::IsMember({"fp8", "bf16"}));
  cmd->add_option("--tokenizer", flags->tokenizer, "tokenizer.json to copy into the checkpoint")->check(CLI::ExistingFile);
  cmd->add_option("--vocab", flags->vocab, "Override the vocabulary size (tests)")->check(CLI::Range(16, 1 << 24));
  cmd->add_option("--threads", flags->threads, "Generator threads (0 = all cores)");
  cmd->callback([flags, run] { *run = [flags] { return RunMakeModel(*flags); }; });
}

}  // namespace flashserve::app
