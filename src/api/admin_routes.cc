// GET /admin/usage: the usage ledger summed over a time range, for operators holding an admin
// key (api/routes.h). Tenant keys never pass: the admin keys are a ring of their own. The
// query runs on the I/O strand (SQLite, milliseconds for a month of a small fleet).
#include "api/routes.h"
#include "base/wall_time.h"
#include "net/api_error.h"

namespace flashserve::api {

bool AdminAllowed(const RouteContext& ctx, const ExchangePtr& exchange) {
  if (ctx.admin_keys == nullptr || !ctx.admin_keys->enabled()) {
    exchange->Respond(net::ErrorResponse(net::Forbidden("admin routes are off: start the server with --admin-key")));
    return false;
  }
  if (!ctx.admin_keys->Find(exchange->request())) {
    exchange->Respond(net::ErrorResponse(net::Unauthorized("admin routes need an admin key (--admin-key)")));
    return false;
  }
  return true;
}

void HandleAdminUsage(const RouteContext& ctx, const ExchangePtr& exchange) {
  if (!AdminAllowed(ctx, exchange)) return;
  if (ctx.meter_store == nullptr)
    return exchange->Respond(net::ErrorResponse(net::NotFound("no metering store: start the server with --meter-db")));
  const net::HttpRequest& r = exchange->request();
  const int64_t now = base::UnixMicros();
  const std::string group = r.Query("group_by");
  auto query = meter::MakeUsageQuery(r.Query("from"), r.Query("to"), r.Query("tenant"), group, now);
  if (!query.ok()) return exchange->Respond(net::ErrorResponse(net::InvalidRequest(query.error().message())));
  auto rows = ctx.meter_store->QueryUsage(*query);
  if (!rows.ok()) return exchange->Respond(net::ErrorResponse(net::FromError(rows.error())));
  meter::Json data = meter::Json::array();
  for (const meter::UsageRow& row : *rows) data.push_back(meter::UsageRowJson(row));
  const meter::Json doc = {{"object", "usage"},
                    {"from", query->from_us / 1'000'000},
                    {"to", query->to_us / 1'000'000},
                    {"group_by", group.empty() ? "tenant" : group},
                    {"data", std::move(data)}};
  net::HttpResponse response;
  response.body = doc.dump();
  exchange->Respond(std::move(response));
}

}  // namespace flashserve::api
