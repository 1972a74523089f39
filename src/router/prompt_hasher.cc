// Prompt tokens and block hashes on the router (router/prompt_hasher.h).
#include "router/prompt_hasher.h"

#include "encoding/encoder.h"
#include "protocol/chat_json.h"

namespace flashserve::router {

namespace {
constexpr char kBosToken[] = "<｜begin▁of▁sentence｜>";
}  // namespace

PromptHasher::PromptHasher(const tokenizer::Tokenizer& tokenizer) : tokenizer_(tokenizer) {
  if (auto id = tokenizer.TokenId(kBosToken)) bos_id_ = *id;
}

base::Result<std::vector<int32_t>> PromptHasher::Tokens(PromptKind kind, const nlohmann::ordered_json& body,
                                                       encoding::EncodingVersion version) const {
  if (kind == PromptKind::kChat) {
    FS_ASSIGN_OR_RETURN(protocol::ChatRequest chat, protocol::ChatRequestFromJson(body));
    // Pictures render as placeholders (as workers that take them do); a request that rendering
    // refuses (typed placeholder text) is hashed as a text-only V4 worker renders it.
    base::Result<encoding::EncodedPrompt> prompt =
        encoding::EncodeChat(chat, version, encoding::EncodeOptions{.v4_picture_parts = true});
    if (!prompt.ok()) prompt = encoding::EncodeChat(chat, version);
    if (!prompt.ok()) return prompt.error();
    return encoding::ToTokenIds(*prompt, tokenizer_);
  }
  auto it = body.find("prompt");
  if (it == body.end()) return base::MakeError(base::ErrorCode::kInvalidArgument, "no prompt");
  const nlohmann::ordered_json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  std::vector<int32_t> ids;
  if (p->is_string()) {
    ids.push_back(bos_id_);
    for (int32_t id : tokenizer_.Encode(p->get_ref<const std::string&>())) ids.push_back(id);
    return ids;
  }
  if (!p->is_array()) return base::MakeError(base::ErrorCode::kInvalidArgument, "prompt: not a string or ids");
  for (const auto& t : *p) {
    if (!t.is_number_integer()) return base::MakeError(base::ErrorCode::kInvalidArgument, "prompt: not ids");
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

PromptBlocks PromptHasher::Blocks(std::span<const int32_t> tokens, std::string_view fingerprint,
                                  std::string_view cache_namespace) {
  PromptBlocks out;
  out.num_tokens = static_cast<int64_t>(tokens.size());
  out.blocks = kv::BlockHashes(kv::HashSeed(fingerprint, cache_namespace), tokens);
  return out;
}

}  // namespace flashserve::router
