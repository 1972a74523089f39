// POST /v1/messages and /v1/messages/count_tokens (Anthropic Messages, also under /anthropic):
// body -> dialect::DialectRequest -> DeepSeek prompt -> job with the Messages writer (api/routes.h).
#include <fmt/format.h>

#include "api/routes.h"
#include "encoding/encoder.h"
#include "net/api_error.h"

namespace flashserve::api {

namespace {

constexpr net::ErrorDialect kAnthropic = net::ErrorDialect::kAnthropic;

// Reads and converts the body, checks the model and encodes the prompt; answers the exchange
// and returns false on failure. A count request has no max_tokens.
bool PrepareMessages(const RouteContext& ctx, net::Exchange& exchange, bool count, dialect::DialectRequest* req,
                     GenerationPlan* plan) {
  auto fail = [&exchange](const net::ApiError& e) {
    exchange.Respond(net::ErrorResponse(e, kAnthropic));
    return false;
  };
  Json body;
  if (!ReadJsonBody(exchange, kAnthropic, &body)) return false;
  if (count && !body.contains("max_tokens")) body["max_tokens"] = 1;
  if (auto e = dialect::ParseMessagesBody(body, DialectContextOf(ctx), req)) return fail(*e);
  if (!ModelServed(ctx, exchange, req->options.model, kAnthropic)) return false;
  if (auto e = EncodePrompt(ctx, req->chat, &plan->prompt, &plan->images, &plan->thinking)) return fail(*e);
  return true;
}

}  // namespace

void HandleMessages(const RouteContext& ctx, const ExchangePtr& exchange) {
  dialect::DialectRequest req;
  GenerationPlan plan;
  if (!PrepareMessages(ctx, *exchange, false, &req, &plan)) return;
  plan.options = std::move(req.options);
  plan.prompt_param = "messages";
  plan.id_prefix = "msg_";
  ConstraintFromResponseFormat(req.chat.response_format, "output_config.format.schema", &plan.constraint);
  if (auto e = ToolCallConstraint(req.chat, ctx.options.encoding_version, &plan.constraint))
    return exchange->Respond(net::ErrorResponse(*e, kAnthropic));
  plan.errors = kAnthropic;
  AddDroppedToolsHeader(req.dropped_tools, &plan.headers);
  MessagesWriterOptions options;
  options.omit_thinking = req.omit_thinking;
  options.seal = ctx.seal;
  plan.make_writer = [options](WriterContext w) { return MakeMessagesWriter(std::move(w), options); };
  StartGeneration(ctx, exchange, std::move(plan));
}

void HandleCountTokens(const RouteContext& ctx, const ExchangePtr& exchange) {
  dialect::DialectRequest req;
  GenerationPlan plan;
  if (!PrepareMessages(ctx, *exchange, true, &req, &plan)) return;
  net::HttpResponse r;
  r.body = Dump(Json{{"input_tokens", static_cast<int64_t>(plan.prompt.size())}});
  exchange->Respond(std::move(r));
}

}  // namespace flashserve::api
