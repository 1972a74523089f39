// `flashserve encode-chat`: renders an OpenAI-style chat request body (a JSON file) with the
// DeepSeek V4 / V4.1 prompt encoder and prints the prompt text exactly (no added newline), or
// with --json an object {"prompt": ..., "ids": [...]}. Developer tool; main thread only.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "base/file_util.h"
#include "encoding/encoder.h"
#include "protocol/chat_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace flashserve::app {
namespace {

struct EncodeChatFlags {
  std::string tokenizer_path;
  std::string encoding = "v4";
  std::string request_path;
  bool json = false;
  bool define_missing_v4_tokens = false;
};

int Fail(const base::Error& error) {
  std::fprintf(stderr, "flashserve encode-chat: %s\n", error.ToString().c_str());
  return 1;
}

base::Result<encoding::EncodedPrompt> RenderRequest(const EncodeChatFlags& flags) {
  std::optional<encoding::EncodingVersion> version = encoding::ParseEncodingVersion(flags.encoding);
  if (!version.has_value()) {
    return base::MakeError(base::ErrorCode::kInvalidArgument,
                           "--encoding must be v4 or v41, got '" + flags.encoding + "'");
  }
  FS_ASSIGN_OR_RETURN(std::string body, base::ReadFileToString(flags.request_path));
  base::Status utf8 = tokenizer::ValidateUtf8(body);
  if (!utf8.ok()) return utf8.error().WithContext("request file " + flags.request_path);
  FS_ASSIGN_OR_RETURN(protocol::ChatRequest request, protocol::ParseChatRequest(body));
  return encoding::EncodeChat(request, *version);
}

int RunEncodeChat(const EncodeChatFlags& flags) {
  if (flags.json && flags.tokenizer_path.empty()) {
    return Fail(base::MakeError(base::ErrorCode::kInvalidArgument, "--json needs --tokenizer"));
  }
  base::Result<encoding::EncodedPrompt> prompt = RenderRequest(flags);
  if (!prompt.ok()) return Fail(prompt.error());
  if (!flags.json) {
    std::fwrite(prompt->text.data(), 1, prompt->text.size(), stdout);
    return 0;
  }
  tokenizer::LoadOptions options;
  options.define_missing_v4_tokens = flags.define_missing_v4_tokens;
  auto tokenizer = tokenizer::Tokenizer::Load(flags.tokenizer_path, options);
  if (!tokenizer.ok()) return Fail(tokenizer.error());
  base::Result<std::vector<int32_t>> ids = encoding::ToTokenIds(*prompt, **tokenizer);
  if (!ids.ok() && ids.error().code() == base::ErrorCode::kBadTokenizer &&
      !flags.define_missing_v4_tokens) {
    return Fail(base::MakeError(ids.error().code(), ids.error().message() +
                                                        "; a demo tokenizer can define it with "
                                                        "--define-missing-v4-tokens"));
  }
  if (!ids.ok()) return Fail(ids.error());
  nlohmann::ordered_json out;
  out["prompt"] = prompt->text;
  out["ids"] = *ids;
  std::string text = out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::printf("%s\n", text.c_str());
  return 0;
}

}  // namespace

void RegisterEncodeChatCommand(CLI::App& app, CommandFn* run) {
  auto flags = std::make_shared<EncodeChatFlags>();
  auto* cmd = app.add_subcommand(
      "encode-chat", "Render a chat request (OpenAI JSON body) as a DeepSeek V4/V4.1 prompt");
  cmd->add_option("--request", flags->request_path, "Request body (JSON file)")->required();
  cmd->add_option("--encoding", flags->encoding, "Prompt format: v4 or v41")
      ->check(CLI::IsMember({"v4", "v41", "v4.1"}));
  cmd->add_option("--tokenizer", flags->tokenizer_path, "tokenizer.json (needed for --json)");
  cmd->add_flag("--json", flags->json,
                "Print {\"prompt\": ..., \"ids\": [...]} instead of the text");
  cmd->add_flag("--define-missing-v4-tokens", flags->define_missing_v4_tokens,
                "Demo tokenizers only: define absent V4 control tokens on placeholder tokens");
  cmd->callback([run, flags] { *run = [flags] { return RunEncodeChat(*flags); }; });
}

}  // namespace flashserve::app
