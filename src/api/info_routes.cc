// GET /v1/models, /v1/models/{id}, /health, /metrics (api/routes.h).
#include "net/api_error.h"
#include "api/routes.h"

namespace flashserve::api {

namespace {

Json ModelJson(const RouteContext& ctx, const serve::ModelInfo& info) {
  return {{"id", info.name}, {"object", "model"}, {"created", ctx.created}, {"owned_by", "flashserve"},
          {"max_model_len", info.max_context}};
}

net::HttpResponse JsonResponse(const Json& body) {
  net::HttpResponse r;
  r.body = Dump(body);
  return r;
}

}  // namespace

void HandleListModels(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json list = {{"object", "list"}, {"data", Json::array({ModelJson(ctx, ctx.service->Info())})}};
  exchange->Respond(JsonResponse(list));
}

void HandleGetModel(const RouteContext& ctx, const ExchangePtr& exchange) {
  const std::string& path = exchange->request().path;
  const std::string id = path.substr(path.rfind("/models/") + 8);
  const serve::ModelInfo info = ctx.service->Info();
  if (id != info.name) {
    return exchange->Respond(
        net::ErrorResponse(net::NotFound("The model '" + id + "' does not exist", "model", "model_not_found")));
  }
  exchange->Respond(JsonResponse(ModelJson(ctx, info)));
}

void HandleHealth(const RouteContext& ctx, const ExchangePtr& exchange) {
  const serve::ServiceStats s = ctx.service->Stats();
  exchange->Respond(JsonResponse({{"status", "ok"}, {"running", s.running}, {"waiting", s.waiting}}));
}

void HandleMetrics(const RouteContext& ctx, const ExchangePtr& exchange) {
  ctx.metrics->SetServiceStats(ctx.service->Stats());
  net::HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = ctx.metrics->Render();
  exchange->Respond(std::move(r));
}

void HandleNotImplemented(const RouteContext&, const ExchangePtr& exchange) {
  const std::string& path = exchange->request().path;
  const char* api = path.find("/messages") != std::string::npos ? "The Anthropic Messages API" : "The OpenAI Responses API";
  exchange->Respond(net::ErrorResponse(net::NotImplemented(
      std::string(api) + " (POST " + path + ") is not implemented yet; use POST /v1/chat/completions")));
}

}  // namespace flashserve::api
