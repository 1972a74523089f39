// GET /v1/models, /v1/models/{id}, /health, /metrics (api/routes.h).
#include "net/api_error.h"
#include "api/routes.h"

namespace flashserve::api {

namespace {

Json ModelJson(const RouteContext& ctx, const serve::ModelInfo& info, const std::string& id) {
  return {{"id", id}, {"object", "model"}, {"created", ctx.created}, {"owned_by", "flashserve"},
          {"max_model_len", info.max_context}};
}

net::HttpResponse JsonResponse(const Json& body) {
  net::HttpResponse r;
  r.body = Dump(body);
  return r;
}

}  // namespace

void HandleListModels(const RouteContext& ctx, const ExchangePtr& exchange) {
  const serve::ModelInfo info = ctx.service->Info();
  Json data = Json::array({ModelJson(ctx, info, info.name)});
  for (const std::string& alias : ctx.options.model_aliases)
    if (!alias.empty() && alias.back() != '*') data.push_back(ModelJson(ctx, info, alias));  // prefixes are not ids
  Json list = {{"object", "list"}, {"data", std::move(data)}};
  exchange->Respond(JsonResponse(list));
}

void HandleGetModel(const RouteContext& ctx, const ExchangePtr& exchange) {
  const std::string& path = exchange->request().path;
  const std::string id = path.substr(path.rfind("/models/") + 8);
  const serve::ModelInfo info = ctx.service->Info();
  if (!ServesModel(ctx, id)) {
    return exchange->Respond(
        net::ErrorResponse(net::NotFound("The model '" + id + "' does not exist", "model", "model_not_found")));
  }
  exchange->Respond(JsonResponse(ModelJson(ctx, info, id)));
}

void HandleHealth(const RouteContext& ctx, const ExchangePtr& exchange) {
  const serve::ServiceStats s = ctx.service->Stats();
  exchange->Respond(JsonResponse({{"status", "ok"}, {"running", s.running}, {"waiting", s.waiting}}));
}

void HandleMetrics(const RouteContext& ctx, const ExchangePtr& exchange) {
  ctx.metrics->SetServiceStats(ctx.service->Stats());
  if (ctx.grammars != nullptr) ctx.metrics->SetGrammarStats(ctx.grammars->stats());
  ctx.metrics->SetProcessStats();
  net::HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx.metrics->Render();
  exchange->Respond(std::move(r));
}

}  // namespace flashserve::api
