// Prompt tokens and block hashes on the router (router/prompt_hasher.h).
#include "router/prompt_hasher.h"

#include <limits>

#include "dialect/dialect_request.h"
#include "encoding/request_prompt.h"

namespace flashserve::router {

namespace {
constexpr char kBosToken[] = "<｜begin▁of▁sentence｜>";
}  // namespace

PromptHasher::PromptHasher(const tokenizer::Tokenizer& tokenizer, const dialect::ReasoningSeal* seal)
    : tokenizer_(tokenizer), seal_(seal) {
  if (auto id = tokenizer.TokenId(kBosToken)) bos_id_ = *id;
}

base::Result<std::vector<int32_t>> PromptHasher::Tokens(PromptKind kind, const nlohmann::ordered_json& body,
                                                       encoding::EncodingVersion version) const {
  if (kind == PromptKind::kOpaque) return base::MakeError(base::ErrorCode::kInvalidArgument, "not tokenized here");
  if (kind != PromptKind::kCompletion) return DialectTokens(kind, body, version);
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

base::Result<std::vector<int32_t>> PromptHasher::DialectTokens(PromptKind kind, const nlohmann::ordered_json& body,
                                                               encoding::EncodingVersion version) const {
  // The workers check token ids against their model's vocabulary; here any id passes.
  const dialect::DialectContext ctx{.vocab_size = std::numeric_limits<int32_t>::max(), .version = version,
                                    .seal = seal_, .estimate_sealed = true};
  dialect::DialectRequest req;
  std::optional<net::ApiError> e = kind == PromptKind::kChat       ? dialect::ParseChatBody(body, ctx, &req)
                                   : kind == PromptKind::kMessages ? dialect::ParseMessagesBody(body, ctx, &req)
                                                                   : dialect::ParseResponsesBody(body, ctx, &req);
  if (e) return base::MakeError(base::ErrorCode::kInvalidArgument, e->message);
  // Pictures render as placeholders (as workers that take them do); a request that rendering
  // refuses (typed placeholder text) is encoded as a text-only V4 worker encodes it.
  base::Result<encoding::RequestPrompt> prompt =
      encoding::EncodeRequest(req.chat, version, encoding::EncodeOptions{.v4_picture_parts = true});
  if (!prompt.ok()) prompt = encoding::EncodeRequest(req.chat, version);
  if (!prompt.ok()) return prompt.error();
  return encoding::ToTokenIds(prompt->prompt, tokenizer_);
}

PromptBlocks PromptHasher::Blocks(std::span<const int32_t> tokens, std::string_view fingerprint,
                                  std::string_view cache_namespace) {
  PromptBlocks out;
  out.num_tokens = static_cast<int64_t>(tokens.size());
  out.blocks = kv::BlockHashes(kv::HashSeed(fingerprint, cache_namespace), tokens);
  return out;
}

}  // namespace flashserve::router
