// POST /v1/chat/completions: body -> ChatRequest -> DeepSeek prompt -> token ids -> job
// (api/routes.h).
#include "net/api_error.h"
#include "api/routes.h"
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

}  // namespace

void HandleChatCompletions(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json body;
  GenerationOptions options;
  if (!ReadGenerationBody(ctx, *exchange, Dialect::kChat, &body, &options)) return;
  base::Result<protocol::ChatRequest> chat = protocol::ChatRequestFromJson(body);
  if (!chat.ok()) return exchange->Respond(net::ErrorResponse(ChatRequestError(chat.error())));
  base::Result<encoding::EncodedPrompt> prompt = encoding::EncodeChat(*chat, ctx.options.encoding_version);
  if (!prompt.ok()) return exchange->Respond(net::ErrorResponse(ChatRequestError(prompt.error())));
  base::Result<std::vector<int32_t>> ids = encoding::ToTokenIds(*prompt, *ctx.tokenizer);
  if (!ids.ok()) return exchange->Respond(net::ErrorResponse(net::FromError(ids.error())));
  StartGeneration(ctx, exchange, Dialect::kChat, std::move(options), std::move(ids).value(),
                  encoding::ThinkingEnabled(*chat), "messages");
}

}  // namespace flashserve::api
