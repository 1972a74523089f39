// POST /tokenize and /detokenize as vLLM serves them: a prompt string (or chat messages,
// encoded as the chat route encodes them) -> token ids, and ids -> text (api/routes.h).
#include "api/routes.h"
#include "net/api_error.h"
#include "protocol/chat_json.h"

namespace flashserve::api {

namespace {

void RespondJson(net::Exchange& exchange, const Json& body) {
  net::HttpResponse r;
  r.body = Dump(body);
  exchange.Respond(std::move(r));
}

// Every field a tokenize body may carry: the prompt or the messages and their chat options.
std::optional<net::ApiError> CheckTokenizeFields(const Json& body) {
  return dialect::CheckKnownFields(body, "", {"model", "prompt", "add_special_tokens", "messages", "tools", "tool_choice",
                                     "thinking", "reasoning_effort", "response_format"});
}

// `model`, when given, must name the served model (a 400 when it is not a string, a 404 when
// it names another); answers the exchange and returns false otherwise.
bool ModelAccepted(const RouteContext& ctx, net::Exchange& exchange, const Json& body) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_string()) {
    exchange.Respond(net::ErrorResponse(net::InvalidRequest("model: expected a string", "model")));
    return false;
  }
  return ModelServed(ctx, exchange, it->get<std::string>(), net::ErrorDialect::kOpenAI);
}

}  // namespace

void HandleTokenize(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json body;
  if (!ReadJsonBody(*exchange, net::ErrorDialect::kOpenAI, &body)) return;
  auto fail = [&exchange](const net::ApiError& e) { exchange->Respond(net::ErrorResponse(e)); };
  if (auto e = CheckTokenizeFields(body)) return fail(*e);
  if (!ModelAccepted(ctx, *exchange, body)) return;
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    base::Result<protocol::ChatRequest> chat = protocol::ChatRequestFromJson(body);
    if (!chat.ok()) return fail(net::FromError(chat.error()));
    dialect::FlattenTextParts(*chat, ctx.options.encoding_version);
    bool thinking = false;
    std::vector<protocol::ImageInput> images;  // counted as the prompt counts them, not encoded
    if (auto e = EncodePrompt(ctx, *chat, &ids, &images, &thinking)) return fail(*e);
  } else if (body.contains("prompt") && body["prompt"].is_string()) {
    const bool special = !body.contains("add_special_tokens") || body["add_special_tokens"] != false;
    if (special) ids.push_back(ctx.service->Info().bos_token_id);
    for (int32_t id : ctx.tokenizer->Encode(body["prompt"].get<std::string>())) ids.push_back(id);
  } else {
    return fail(net::InvalidRequest("prompt: a string (or messages) is required", "prompt"));
  }
  const serve::ModelInfo info = ctx.service->Info();
  RespondJson(*exchange, {{"count", ids.size()}, {"max_model_len", info.max_context}, {"tokens", ids}});
}

void HandleDetokenize(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json body;
  if (!ReadJsonBody(*exchange, net::ErrorDialect::kOpenAI, &body)) return;
  auto fail = [&exchange](const net::ApiError& e) { exchange->Respond(net::ErrorResponse(e)); };
  if (auto e = dialect::CheckKnownFields(body, "", {"model", "tokens"})) return fail(*e);
  if (!ModelAccepted(ctx, *exchange, body)) return;
  const Json* tokens = body.contains("tokens") ? &body["tokens"] : nullptr;
  if (tokens == nullptr || !tokens->is_array()) return fail(net::InvalidRequest("tokens: an array of token ids is required", "tokens"));
  const int64_t vocab = ctx.service->Info().vocab_size;
  std::vector<int32_t> ids;
  for (const Json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
      return fail(net::InvalidRequest("tokens: token ids must be integers in [0, " + std::to_string(vocab) + ")", "tokens"));
    ids.push_back(t.get<int32_t>());
  }
  RespondJson(*exchange, {{"prompt", ctx.tokenizer->Decode(ids)}});
}

}  // namespace flashserve::api
