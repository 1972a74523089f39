// POST /v1/chat/completions: body -> ChatRequest (dialect::ParseChatBody) -> DeepSeek prompt ->
// token ids -> job (api/routes.h). Every field is implemented, a documented hint, or a 400 naming it.
#include "api/routes.h"
#include "net/api_error.h"

namespace flashserve::api {

void HandleChatCompletions(const RouteContext& ctx, const ExchangePtr& exchange) {
  auto fail = [&exchange](const net::ApiError& e) { exchange->Respond(net::ErrorResponse(e)); };
  Json body;
  if (!ReadJsonBody(*exchange, net::ErrorDialect::kOpenAI, &body)) return;
  dialect::DialectRequest req;
  if (auto e = dialect::ParseChatBody(body, DialectContextOf(ctx), &req)) return fail(*e);
  if (!ModelServed(ctx, *exchange, req.options.model, net::ErrorDialect::kOpenAI)) return;
  GenerationPlan plan;
  plan.options = std::move(req.options);
  if (auto e = ReadConstraintFields(body, /*chat=*/true, &plan.constraint)) return fail(*e);
  if (auto e = ToolCallConstraint(req.chat, ctx.options.encoding_version, &plan.constraint)) return fail(*e);
  if (auto e = EncodePrompt(ctx, req.chat, &plan.prompt, &plan.images, &plan.thinking)) return fail(*e);
  plan.make_writer = [](WriterContext w) { return MakeChatWriter(std::move(w)); };
  StartGeneration(ctx, exchange, std::move(plan));
}

}  // namespace flashserve::api
