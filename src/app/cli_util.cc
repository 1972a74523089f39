// Developer command helpers (app/cli_util.h).
#include "app/cli_util.h"

#include <ctime>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "base/wall_time.h"
#include "base/file_util.h"
#include "base/log.h"
#include "encoding/prompt.h"
#include "grammar/token_vocabulary.h"
#include "kernels/gemm/matmul.h"
#include "tokenizer/engram_map.h"

namespace flashserve::app {

using base::Error;
using base::ErrorCode;

std::vector<int32_t> RandomTokenIds(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(2, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

base::Result<std::vector<int32_t>> ParseTokenList(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    char ch = text[i];
    if (ch == ',' || ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
      ++i;
      continue;
    }
    if (ch < '0' || ch > '9') return Error(ErrorCode::kInvalidArgument, "token list: unexpected character '" + std::string(1, ch) + "'");
    int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      v = v * 10 + (text[i++] - '0');
      if (v > INT32_MAX) return Error(ErrorCode::kInvalidArgument, "token list: id too large");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return Error(ErrorCode::kInvalidArgument, "token list is empty");
  return ids;
}

base::Result<std::vector<int32_t>> TokensFromFlags(const std::string& tokens, const std::string& tokens_file) {
  if (tokens.empty() == tokens_file.empty())
    return Error(ErrorCode::kInvalidArgument, "give exactly one of --tokens and --tokens-file");
  if (!tokens.empty()) return ParseTokenList(tokens);
  FS_ASSIGN_OR_RETURN(std::string text, base::ReadFileToString(tokens_file));
  return ParseTokenList(text);
}

std::string DefaultPackedWeightsDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return (std::filesystem::path(xdg) / "flashserve" / "packed").string();
  const char* home = std::getenv("HOME");
  if (home && *home) return (std::filesystem::path(home) / ".cache" / "flashserve" / "packed").string();
  return "";
}

void AddEngineFlags(CLI::App* cmd, engine::EngineOptions* options, bool* no_qat) {
  cmd->add_flag("--no-qat", *no_qat,
                "Turn off the quantization-aware-training emulation (FP8/FP4 round trips, the BF16 head input)");
  cmd->add_flag("--reference", options->reference_kernels, "Use the naive reference kernels (slow, fp64 accumulation)");
  cmd->add_option("--threads", options->num_threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag_callback("--no-huge-page-head", [options] { options->head_in_huge_pages = false; },
                         "Read the output head from the checkpoint mapping, not a copy in 2 MiB pages (saves its size in memory)");
  cmd->add_flag_callback("--no-preload-weights", [options] { options->preload_weights = false; },
                         "Read weights on demand instead of all at load (faster start, slower first requests; decode may "
                         "then stream them through 4 KiB pages)");
  cmd->add_flag_callback("--fp4-checkpoint-order", [options] { options->fp4_lane_pairs = false; },
                         "Decode FP4 experts from the checkpoint mapping, not from a copy repacked for the AVX-512 "
                         "decoders (saves their size in memory; slower experts)");
  cmd->add_option("--packed-weights-dir", options->packed_weights_dir,
                  "Where the repacked weights (FP4 experts in the AVX-512 layout, the output head) are kept: a "
                  "file per checkpoint, written on the first start and mapped on later ones, shared by the "
                  "processes of the machine that map it (default: $XDG_CACHE_HOME/flashserve/packed, else "
                  "~/.cache/flashserve/packed)");
  cmd->add_flag_callback("--no-packed-weights-file", [options] { options->packed_weights_file = false; },
                         "Repack the weights in memory at every start instead of keeping a packed weights file "
                         "(slower start, nothing written)");
  cmd->add_flag_callback("--no-amx", [options] { options->amx = false; },
                         "No AMX tiles for FP4/FP8 products: the AVX-512 paths' bits (as the CUDA kernels give), "
                         "slower prefill; the default uses AMX where the CPU has it");
}

namespace {

// V4.1 Engram layers hash token classes derived from the checkpoint's own tokenizer.
base::Status BindEngramTokenMap(engine::Model& model, std::string path) {
  if (!model.needs_engram_token_map()) return base::Status::Ok();
  const std::filesystem::path own = std::filesystem::path(model.dir()) / "tokenizer.json";
  if (path.empty() && std::filesystem::exists(own)) path = own.string();
  if (path.empty()) path = FindDefaultTokenizer();
  if (path.empty())
    return base::Error(base::ErrorCode::kNotFound,
                       "the checkpoint has Engram layers, which need its tokenizer.json (none found; pass --tokenizer)");
  FS_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::Load(path));
  tokenizer::EngramTokenMap map = tokenizer::BuildEngramTokenMap(*tok);
  base::Status s = model.SetEngramTokenMap(std::move(map.classes), map.num_classes);
  if (!s.ok()) return s.error().WithContext("Engram token classes from " + path);
  FS_LOG(kInfo, "Engram: {} token classes from {}", map.num_classes, path);
  return base::Status::Ok();
}

}  // namespace

std::unique_ptr<engine::Model> LoadModelOrPrint(const std::string& dir, const engine::EngineOptions& options,
                                                const std::string& tokenizer_path) {
  engine::ModelLoadOptions load;
  load.head_in_huge_pages = options.head_in_huge_pages;
  load.preload_weights = options.preload_weights;
  load.fp4_lane_pairs = options.fp4_lane_pairs;
  if (options.packed_weights_file)
    load.packed_dir = options.packed_weights_dir.empty() ? DefaultPackedWeightsDir() : options.packed_weights_dir;
  kernels::SetAmx(options.amx);  // before the load logs which matrix products run
  auto model = engine::Model::Load(dir, load);
  if (!model.ok()) {
    PrintError(model.error());
    return nullptr;
  }
  if (base::Status s = BindEngramTokenMap(**model, tokenizer_path); !s.ok()) {
    PrintError(s.error());
    return nullptr;
  }
  return std::move(model).value();
}

base::Result<std::vector<kvstore::TtlClass>> ParseTtlClasses(const std::string& spec) {
  std::vector<kvstore::TtlClass> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 >= item.size())
      return Error(ErrorCode::kInvalidArgument, "TTL class '" + item + "': expected name=duration, e.g. agent=3d");
    std::string number = item.substr(eq + 1);
    int64_t unit = 1;
    switch (number.back()) {
      case 's': unit = 1; number.pop_back(); break;
      case 'm': unit = 60; number.pop_back(); break;
      case 'h': unit = 3600; number.pop_back(); break;
      case 'd': unit = 86400; number.pop_back(); break;
      default: break;
    }
    if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos)
      return Error(ErrorCode::kInvalidArgument, "TTL class '" + item + "': bad duration");
    out.push_back({item.substr(0, eq), std::stoll(number) * unit});
    pos = end + 1;
  }
  return out;
}

int PrintError(const base::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.ToString().c_str());
  return 1;
}

// The DeepSeek tokenizer installed by scripts/setup.sh: searched in the folders above the
// executable (a build tree inside the checkout) and in an install prefix's share/flashserve.
std::string FindDefaultTokenizer() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir = fs::canonical("/proc/self/exe", ec).parent_path();
  for (int up = 0; up < 5 && !dir.empty(); ++up, dir = dir.parent_path()) {
    for (const fs::path& candidate : {dir / kTokenizerRel, dir / "share/flashserve/tokenizer/deepseek_v3/tokenizer.json"})
      if (fs::exists(candidate, ec)) return candidate.string();
    if (dir == dir.parent_path()) break;
  }
  return "";
}

// Loads the tokenizer; when it lacks the V4 control tokens (the DeepSeek-V3 file used by demo
// models), defines them on placeholder ids. Expected for the demo model; a warning otherwise.
base::Result<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const std::string& path, bool demo) {
  std::vector<std::string> defined;  // one load: what the file lacks is defined and reported
  FS_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::Load(path, tokenizer::LoadOptions{.define_missing_v4_tokens = true,
                                                                                         .defined_v4_tokens = &defined}));
  if (defined.empty()) return tok;
  std::string missing;
  for (const std::string& t : defined) missing += (missing.empty() ? "" : " ") + t;
  if (demo) {
    FS_LOG(kDebug, "demo tokenizer: V4 control tokens on placeholder ids: {}", missing);
  } else {
    FS_LOG(kWarning, "tokenizer {} lacks the DeepSeek-V4 control tokens {}; defining them on placeholder ids "
           "(right for generated demo models only)", path, missing);
  }
  return tok;
}

base::Result<std::vector<meter::ApiKey>> ReadApiKeys(const std::vector<std::string>& flags, const std::string& file,
                                                     std::string* first_secret) {
  std::vector<std::string> specs = flags;
  if (!file.empty()) {
    FS_ASSIGN_OR_RETURN(std::string text, base::ReadFileToString(file));
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t end = std::min(text.find('\n', pos), text.size());
      std::string line = text.substr(pos, end - pos);
      pos = end + 1;
      line.erase(0, line.find_first_not_of(" \t\r"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (!line.empty() && line[0] != '#') specs.push_back(line);
    }
  }
  std::vector<meter::ApiKey> keys;
  for (const std::string& spec : specs) {
    auto key = meter::ParseApiKey(spec);
    if (!key.ok()) return key.error();
    if (first_secret != nullptr && keys.empty()) *first_secret = spec.substr(0, spec.find(':'));
    key->id = "static_" + std::to_string(keys.size() + 1);
    keys.push_back(*key);
  }
  return keys;
}

std::string UtcMinute(int64_t unix_seconds) { return base::FormatUtc(unix_seconds, "%Y-%m-%d %H:%M"); }

vision::VisionParams VisionParamsOf(const model::ModelConfig& c) {
  vision::VisionParams v;
  v.patch_size = c.vision.patch_size;
  v.downsample_ratio = c.vision.downsample_ratio;
  v.max_n_token = c.vision.max_image_tokens;
  v.min_pixels = c.vision.min_pixels;
  v.max_wh_ratio = c.vision.max_wh_ratio;
  v.layout = c.is_v41() ? vision::SpanLayout::kV41 : vision::SpanLayout::kVisionExp;
  return v;
}

// Engram hashes token classes of the tokenizer that ships with the checkpoint, so a generated
// V4.1 model takes its class count from that tokenizer (the released one has 99092).
base::Status FitEngramToTokenizer(model::ModelConfig* config, std::string* tokenizer_path) {
  if (config->engram.layer_ids.empty()) return base::Status::Ok();
  if (tokenizer_path->empty()) *tokenizer_path = FindDefaultTokenizer();
  if (tokenizer_path->empty())
    return base::Error(base::ErrorCode::kNotFound, "this preset has Engram layers, whose hashes need a tokenizer: "
                                                   "pass --tokenizer FILE (or run ./scripts/setup.sh)");
  FS_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::Load(*tokenizer_path));
  const int64_t classes = tokenizer::BuildEngramTokenMap(*tok).num_classes;
  if (classes > config->vocab_size)
    return base::Error(base::ErrorCode::kInvalidArgument, "the tokenizer has more Engram classes than --vocab");
  if (classes != config->engram.compressed_vocab_size)
    std::printf("Engram: engram_compressed_vocab_size set to %lld, the class count of %s\n",
                static_cast<long long>(classes), tokenizer_path->c_str());
  config->engram.compressed_vocab_size = classes;
  return base::Status::Ok();
}

std::shared_ptr<grammar::GrammarCache> GrammarCacheFor(const tokenizer::Tokenizer& tok, const engine::Model& model,
                                                       size_t max_bytes) {
  const auto eos = static_cast<int32_t>(model.config().eos_token_id);
  return std::make_shared<grammar::GrammarCache>(
      grammar::VocabularyFromTokenizer(tok, {eos}, model.config().vocab_size, {std::string(encoding::kDsmlToken)}),
      max_bytes);
}

}  // namespace flashserve::app
