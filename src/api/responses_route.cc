// POST /v1/responses (OpenAI Responses, stateless as DeepSeek serves it): body ->
// dialect::DialectRequest -> DeepSeek prompt -> job with the Responses writer (api/routes.h).
#include "api/routes.h"
#include "encoding/encoder.h"
#include "net/api_error.h"

namespace flashserve::api {

void HandleResponses(const RouteContext& ctx, const ExchangePtr& exchange) {
  constexpr net::ErrorDialect kOpenAI = net::ErrorDialect::kOpenAI;
  auto fail = [&exchange](const net::ApiError& e) { exchange->Respond(net::ErrorResponse(e)); };
  Json body;
  if (!ReadJsonBody(*exchange, kOpenAI, &body)) return;
  dialect::DialectRequest req;
  if (auto e = dialect::ParseResponsesBody(body, DialectContextOf(ctx), &req)) return fail(*e);
  if (!ModelServed(ctx, *exchange, req.options.model, kOpenAI)) return;
  GenerationPlan plan;
  if (auto e = EncodePrompt(ctx, req.chat, &plan.prompt, &plan.images, &plan.thinking)) return fail(*e);
  plan.options = std::move(req.options);
  plan.prompt_param = "input";
  ConstraintFromResponseFormat(req.chat.response_format, "text.format.schema", &plan.constraint);
  if (plan.constraint.constraint.kind == protocol::ConstraintKind::kJsonObject) plan.constraint.param = "text.format";
  if (auto e = ToolCallConstraint(req.chat, ctx.options.encoding_version, &plan.constraint)) return fail(*e);
  plan.max_tokens_param = "max_output_tokens";
  plan.id_prefix = "resp_";
  AddDroppedToolsHeader(req.dropped_tools, &plan.headers);
  ResponsesWriterOptions options;
  options.echo = std::move(req.echo);
  options.summary = req.summary;
  options.encrypted_reasoning = req.encrypted_reasoning;
  options.seal = ctx.seal;
  plan.make_writer = [options](WriterContext w) { return MakeResponsesWriter(std::move(w), options); };
  StartGeneration(ctx, exchange, std::move(plan));
}

}  // namespace flashserve::api
