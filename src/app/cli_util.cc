// Developer command helpers (app/cli_util.h).
#include "app/cli_util.h"

#include <cstdio>

#include "base/file_util.h"

namespace flashserve::app {

using base::Error;
using base::ErrorCode;

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

void AddEngineFlags(CLI::App* cmd, engine::EngineOptions* options, bool* no_qat) {
  cmd->add_flag("--no-qat", *no_qat, "Turn off the quantization-aware-training emulation (FP8/FP4 round trips)");
  cmd->add_flag("--reference", options->reference_kernels, "Use the naive reference kernels (slow, fp64 accumulation)");
  cmd->add_option("--threads", options->num_threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
}

std::unique_ptr<engine::Model> LoadModelOrPrint(const std::string& dir) {
  auto model = engine::Model::Load(dir);
  if (!model.ok()) {
    PrintError(model.error());
    return nullptr;
  }
  return std::move(model).value();
}

int PrintError(const base::Error& error) {
  std::fprintf(stderr, "error: %s\n", error.ToString().c_str());
  return 1;
}

}  // namespace flashserve::app
