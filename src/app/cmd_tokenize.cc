// `flashserve tokenize` (text -> JSON array of ids, no BOS) and `flashserve detokenize` (ids ->
// text, printed exactly, no added newline) over a Hugging Face tokenizer.json. Developer tools;
// main thread only. Invalid UTF-8 input is an error with its byte offset and exit status 1.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "base/file_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace flashserve::app {
namespace {

struct TokenizeFlags {
  std::string tokenizer_path;
  std::string text;
  std::string text_file;
  std::string ids;
  bool plain = false;
  bool define_missing_v4_tokens = false;
};

int Fail(const char* command, const base::Error& error) {
  std::fprintf(stderr, "flashserve %s: %s\n", command, error.ToString().c_str());
  return 1;
}

base::Result<std::unique_ptr<tokenizer::Tokenizer>> LoadTokenizer(const TokenizeFlags& flags) {
  tokenizer::LoadOptions options;
  options.define_missing_v4_tokens = flags.define_missing_v4_tokens;
  return tokenizer::Tokenizer::Load(flags.tokenizer_path, options);
}

int RunTokenize(const TokenizeFlags& flags) {
  std::string text = flags.text;
  if (!flags.text_file.empty()) {
    auto contents = base::ReadFileToString(flags.text_file);
    if (!contents.ok()) return Fail("tokenize", contents.error());
    text = std::move(contents).value();
  }
  if (base::Status utf8 = tokenizer::ValidateUtf8(text); !utf8.ok()) {
    return Fail("tokenize", utf8.error().WithContext(flags.text_file.empty() ? "--text" : flags.text_file));
  }
  auto tok = LoadTokenizer(flags);
  if (!tok.ok()) return Fail("tokenize", tok.error());
  const std::vector<int32_t> ids = flags.plain ? (*tok)->EncodePlain(text) : (*tok)->Encode(text);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(ids[i]);
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// Accepts "1,2,3", "1 2 3" and "[1, 2, 3]".
base::Result<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ',' || c == ' ' || c == '[' || c == ']' || c == '\t' || c == '\n') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end == i || end - i > 10 || std::stoll(text.substr(i, end - i)) > INT32_MAX) {
      return base::MakeError(base::ErrorCode::kInvalidArgument,
                             "--ids: expected non-negative integers separated by commas, got '" + text + "'");
    }
    ids.push_back(static_cast<int32_t>(std::stoll(text.substr(i, end - i))));
    i = end;
  }
  return ids;
}

int RunDetokenize(const TokenizeFlags& flags) {
  auto ids = ParseIds(flags.ids);
  if (!ids.ok()) return Fail("detokenize", ids.error());
  auto tok = LoadTokenizer(flags);
  if (!tok.ok()) return Fail("detokenize", tok.error());
  const std::string text = (*tok)->Decode(*ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

void AddCommonFlags(CLI::App* cmd, TokenizeFlags* flags) {
  cmd->add_option("--tokenizer", flags->tokenizer_path, "Hugging Face tokenizer.json")->required();
  cmd->add_flag("--define-missing-v4-tokens", flags->define_missing_v4_tokens,
                "Demo models only: define missing V4 control tokens on placeholder ids");
}

}  // namespace

void RegisterTokenizeCommands(CLI::App& app, CommandFn* run) {
  auto flags = std::make_shared<TokenizeFlags>();
  auto* tokenize = app.add_subcommand(
      "tokenize", "Print the token ids of a text as a JSON array (no BOS; added tokens recognised like HF)");
  AddCommonFlags(tokenize, flags.get());
  auto* text = tokenize->add_option("--text", flags->text, "Text to tokenize (UTF-8)");
  auto* file = tokenize->add_option("--text-file", flags->text_file, "File whose bytes are tokenized (UTF-8)");
  text->excludes(file);
  tokenize->add_flag("--plain", flags->plain, "Treat added/special token strings as plain text");
  tokenize->callback([run, flags, text, file] {
    if (text->count() == 0 && file->count() == 0) throw CLI::RequiredError("--text or --text-file");
    *run = [flags] { return RunTokenize(*flags); };
  });

  auto* detokenize = app.add_subcommand("detokenize", "Print the text of token ids exactly (no added newline)");
  AddCommonFlags(detokenize, flags.get());
  detokenize->add_option("--ids", flags->ids, "Token ids, e.g. 1,2,3")->required();
  detokenize->callback([run, flags] { *run = [flags] { return RunDetokenize(*flags); }; });
}

}  // namespace flashserve::app
