// GET /v1/load, /v1/kv/events, /v1/kv/snapshot: what the router polls from a worker (api/routes.h).
#include <charconv>

#include "api/routes.h"
#include "encoding/version.h"
#include "net/api_error.h"

namespace flashserve::api {

namespace {

constexpr size_t kMaxEventsPerPage = 4096;

// Parses an optional unsigned query parameter; false (and answers 400) when malformed.
bool ReadCount(const ExchangePtr& exchange, std::string_view name, uint64_t* out) {
  const std::string text = exchange->request().Query(name);
  if (text.empty()) return true;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    exchange->Respond(net::ErrorResponse(
        net::InvalidRequest("query parameter '" + std::string(name) + "' must be a non-negative integer", std::string(name))));
    return false;
  }
  *out = value;
  return true;
}

net::HttpResponse JsonText(std::string body) {
  net::HttpResponse r;
  r.body = std::move(body);
  return r;
}

bool RequireKvEvents(const RouteContext& ctx, const ExchangePtr& exchange) {
  if (ctx.service->HasKvEvents()) return true;
  exchange->Respond(net::ErrorResponse(net::NotFound("this worker runs without a prefix cache: no KV events")));
  return false;
}

}  // namespace

void HandleLoad(const RouteContext& ctx, const ExchangePtr& exchange) {
  const serve::ServiceStats s = ctx.service->Stats();
  const serve::ModelInfo info = ctx.service->Info();
  protocol::WorkerLoad load;
  load.model = info.name;
  load.fingerprint = info.fingerprint;
  load.role = ctx.options.role;
  load.prompt_format = std::string(encoding::EncodingVersionName(ctx.options.encoding_version));
  load.transfer_address = ctx.options.transfer_address;
  load.queued_prefill_tokens = s.queued_prefill_tokens;
  load.queued_images = s.queued_images;
  load.running = s.running;
  load.waiting = s.waiting;
  load.state_pool_bytes = s.state_pool_bytes;
  load.state_pool_capacity = s.state_pool_capacity;
  load.recent_ttft_seconds = ctx.metrics->RecentTimeToFirstToken();
  load.prefill_tokens_per_second = s.prefill_tokens_per_second;
  load.busy_fraction = s.busy_fraction;
  load.generated_tokens_total = s.generated_tokens_total;
  load.engine_busy_seconds_total = s.engine_busy_seconds_total;
  load.kv_enabled = ctx.service->HasKvEvents();
  if (load.kv_enabled) {
    const protocol::KvEventPage head = ctx.service->KvEvents(UINT64_MAX, 0);
    load.kv_epoch = head.epoch;
    load.kv_last_seq = head.last_seq;
  }
  exchange->Respond(JsonText(protocol::ToJson(load)));
}

void HandleKvEvents(const RouteContext& ctx, const ExchangePtr& exchange) {
  if (!RequireKvEvents(ctx, exchange)) return;
  uint64_t after = 0, limit = kMaxEventsPerPage;
  if (!ReadCount(exchange, "after", &after) || !ReadCount(exchange, "limit", &limit)) return;
  limit = std::min<uint64_t>(std::max<uint64_t>(limit, 1), kMaxEventsPerPage);
  exchange->Respond(JsonText(protocol::ToJson(ctx.service->KvEvents(after, limit))));
}

void HandleKvSnapshot(const RouteContext& ctx, const ExchangePtr& exchange) {
  if (!RequireKvEvents(ctx, exchange)) return;
  exchange->Respond(JsonText(protocol::ToJson(ctx.service->KvSnapshot())));
}

}  // namespace flashserve::api
