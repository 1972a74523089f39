// Routing and request metrics (net/route_table.h).
#include "net/route_table.h"

#include "base/clock.h"
#include "net/api_error.h"

namespace flashserve::net {

namespace {

const std::vector<double> kLatencyBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

// Forwards to the session's exchange and records the status and duration when it ends
// (status 499 when the client went away first).
class MeteredExchange final : public Exchange, public std::enable_shared_from_this<MeteredExchange> {
 public:
  MeteredExchange(std::shared_ptr<Exchange> inner, const RouteTable::RecordFn* record, std::string label)
      : inner_(std::move(inner)), record_(record), label_(std::move(label)) {}

  void Init() {
    std::weak_ptr<MeteredExchange> weak = weak_from_this();
    inner_->SetCloseHandler([weak] {
      auto self = weak.lock();
      if (!self) return;
      self->Record(499);
      if (self->on_close_) self->on_close_();
    });
  }

  const HttpRequest& request() const override { return inner_->request(); }
  void Respond(HttpResponse response) override {
    const int status = response.status;
    inner_->Respond(std::move(response));
    Record(status);
  }
  void StartStream(int status, std::string content_type, HeaderList headers) override {
    status_ = status;
    inner_->StartStream(status, std::move(content_type), std::move(headers));
  }
  void Write(std::string data) override { inner_->Write(std::move(data)); }
  void EndStream() override {
    inner_->EndStream();
    Record(status_);
  }
  bool closed() const override { return inner_->closed(); }
  void Post(std::function<void()> task) override { inner_->Post(std::move(task)); }
  void PostAfter(double seconds, std::function<void()> task) override { inner_->PostAfter(seconds, std::move(task)); }
  void SetCloseHandler(std::function<void()> handler) override { on_close_ = std::move(handler); }
  double start_seconds() const override { return inner_->start_seconds(); }

 private:
  void Record(int status) {
    if (recorded_ || !*record_) return;
    recorded_ = true;
    (*record_)(label_, status, base::MonotonicSeconds() - inner_->start_seconds());
  }

  std::shared_ptr<Exchange> inner_;
  const RouteTable::RecordFn* record_;
  std::string label_;
  std::function<void()> on_close_;
  int status_ = 200;
  bool recorded_ = false;
};

}  // namespace

bool RouteTable::Route::Matches(const std::string& p) const {
  if (!path.empty() && path.back() == '*') return p.size() >= path.size() && p.compare(0, path.size() - 1, path, 0, path.size() - 1) == 0;
  return p == path;
}

void RouteTable::Add(std::string method, std::string path, std::string label, Handler handler, bool needs_key,
                     ErrorDialect errors) {
  routes_.push_back(Route{std::move(method), std::move(path), std::move(label), std::move(handler), needs_key, errors});
}

void RouteTable::Handle(std::shared_ptr<Exchange> exchange) const {
  const HttpRequest& req = exchange->request();
  std::string allow;
  ErrorDialect errors = ErrorDialect::kOpenAI;
  for (const Route& r : routes_) {
    if (!r.Matches(req.path)) continue;
    if (r.method == req.method) {
      auto metered = std::make_shared<MeteredExchange>(std::move(exchange), &record_, r.label);
      metered->Init();
      if (r.needs_key && authorize_ && !authorize_(req)) {
        const bool anthropic = r.errors == ErrorDialect::kAnthropic;
        return metered->Respond(ErrorResponse(
            Unauthorized(anthropic ? "Incorrect or missing API key: send \"x-api-key: <key>\" or \"Authorization: Bearer <key>\"" : ""),
            r.errors));
      }
      r.handler(metered);
      return;
    }
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
    errors = r.errors;
  }
  MeteredExchange metered(exchange, &record_, "other");
  if (allow.empty()) {
    return metered.Respond(ErrorResponse(NotFound("Unknown request URL: " + req.method + " " + req.path, "", "unknown_url"),
                                         DialectForPath(req.path)));
  }
  metered.Respond(ErrorResponse(MethodNotAllowed(
      "Method " + req.method + " is not allowed for " + req.path + " (allowed: " + allow + ")", allow), errors));
}

void RecordExchange(MetricsRegistry& registry, const std::string& prefix, const std::string& route, int status,
                    double seconds) {
  registry.Counter(prefix + "http_requests_total", "HTTP requests by route and status",
                   {{"route", route}, {"status", std::to_string(status)}})
      .Add();
  registry.Histo(prefix + "http_request_duration_seconds", "Time from request read to response end", kLatencyBuckets,
                 {{"route", route}})
      .Observe(seconds);
}

}  // namespace flashserve::net
