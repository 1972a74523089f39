// Operators' routes over the metering store (meter/admin_http.h).
#include "meter/admin_http.h"

#include "base/wall_time.h"
#include "net/api_error.h"

namespace flashserve::meter {

namespace {
// At most this many queries wait for the admin thread; more are answered 503.
constexpr size_t kMaxQueued = 64;
}  // namespace

AdminRoutes::AdminRoutes(const std::vector<ApiKey>& admin_keys, MeterStore* store) : store_(store) {
  admin_keys_.Replace(admin_keys);
  if (admin_keys_.enabled() && store_ != nullptr) thread_ = std::thread([this] { Loop(); });  // else 403/404 inline
}

AdminRoutes::~AdminRoutes() {
  std::deque<std::function<void()>> dropped;  // their servers have stopped: nobody is listening
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    dropped.swap(tasks_);
  }
  dropped.clear();  // released now, while the query under way finishes
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool AdminRoutes::Allowed(const std::shared_ptr<net::Exchange>& exchange) const {
  if (!admin_keys_.enabled()) {
    exchange->Respond(net::ErrorResponse(net::Forbidden("admin routes are off: start the server with --admin-key")));
    return false;
  }
  if (!admin_keys_.Find(exchange->request())) {
    exchange->Respond(net::ErrorResponse(net::Unauthorized("admin routes need an admin key (--admin-key)")));
    return false;
  }
  return true;
}

void AdminRoutes::Usage(const std::shared_ptr<net::Exchange>& exchange) {
  if (!Allowed(exchange)) return;
  if (store_ == nullptr)
    return exchange->Respond(net::ErrorResponse(net::NotFound("no metering store: start the server with --meter-db")));
  const net::HttpRequest& r = exchange->request();
  const std::string group = r.Query("group_by");
  auto query = MakeUsageQuery(r.Query("from"), r.Query("to"), r.Query("tenant"), group, base::UnixMicros());
  if (!query.ok()) return exchange->Respond(net::ErrorResponse(net::InvalidRequest(query.error().message())));
  const bool queued = Run([this, exchange, query = *query, group] {
    net::HttpResponse response;
    auto rows = store_->QueryUsage(query);
    if (rows.ok()) {
      Json data = Json::array();
      for (const UsageRow& row : *rows) data.push_back(UsageRowJson(row));
      response.body = Json{{"object", "usage"},
                           {"from", query.from_us / 1'000'000},
                           {"to", query.to_us / 1'000'000},
                           {"group_by", group.empty() ? "tenant" : group},
                           {"data", std::move(data)}}
                          .dump();
    } else {
      response = net::ErrorResponse(net::FromError(rows.error()));
    }
    exchange->Post([exchange, response = std::move(response)]() mutable { exchange->Respond(std::move(response)); });
  });
  if (!queued)
    exchange->Respond(net::ErrorResponse(net::Unavailable("too many admin queries are waiting; retry later", 1)));
}

bool AdminRoutes::Run(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (tasks_.size() >= kMaxQueued) return false;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

void AdminRoutes::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (stop_) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace flashserve::meter
