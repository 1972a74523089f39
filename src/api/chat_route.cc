// POST /v1/chat/completions: body -> ChatRequest -> DeepSeek prompt -> token ids -> job
// (api/routes.h).
#include <optional>

#include "api/routes.h"
#include "net/api_error.h"
#include "encoding/encoder.h"
#include "protocol/chat_json.h"

namespace flashserve::api {

namespace {

// kBadChatRequest messages start with the field path ("messages[2].content: ..."); that path
// becomes the error's `param`.
net::ApiError ChatRequestError(const base::Error& error) {
  const std::string& m = error.message();
  const size_t colon = m.find(": ");
  const bool is_path = colon != std::string::npos && m.find(' ') > colon;
  return net::FromError(error, is_path ? m.substr(0, colon) : "");
}

// Image parts need a vision encoder stage, which this server does not have yet.
std::optional<net::ApiError> ImageInputError(const protocol::ChatRequest& chat) {
  for (size_t m = 0; m < chat.messages.size(); ++m) {
    const auto& parts = chat.messages[m].content.parts;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].type != protocol::PartType::kImage) continue;
      return net::FromError(base::Error(base::ErrorCode::kInvalidArgument,
                                        "image inputs are not supported yet: this server runs the text model only "
                                        "(vision is planned as a separate encoder stage)"),
                            "messages[" + std::to_string(m) + "].content[" + std::to_string(i) + "]");
    }
  }
  return std::nullopt;
}

}  // namespace

void HandleChatCompletions(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json body;
  GenerationOptions options;
  if (!ReadGenerationBody(ctx, *exchange, Dialect::kChat, &body, &options)) return;
  base::Result<protocol::ChatRequest> chat = protocol::ChatRequestFromJson(body);
  if (!chat.ok()) return exchange->Respond(net::ErrorResponse(ChatRequestError(chat.error())));
  if (auto error = ImageInputError(*chat)) return exchange->Respond(net::ErrorResponse(*error));
  base::Result<encoding::EncodedPrompt> prompt = encoding::EncodeChat(*chat, ctx.options.encoding_version);
  if (!prompt.ok()) return exchange->Respond(net::ErrorResponse(ChatRequestError(prompt.error())));
  base::Result<std::vector<int32_t>> ids = encoding::ToTokenIds(*prompt, *ctx.tokenizer);
  if (!ids.ok()) return exchange->Respond(net::ErrorResponse(net::FromError(ids.error())));
  StartGeneration(ctx, exchange, Dialect::kChat, std::move(options), std::move(ids).value(),
                  encoding::ThinkingEnabled(*chat), "messages");
}

}  // namespace flashserve::api
