// Routing and request metrics (api/router.h).
#include "api/router.h"

#include "net/api_error.h"
#include "base/clock.h"

namespace flashserve::api {

namespace {

// Forwards to the session's exchange and records the status and duration when it ends
// (status 499 when the client went away first).
class MeteredExchange final : public net::Exchange, public std::enable_shared_from_this<MeteredExchange> {
 public:
  MeteredExchange(std::shared_ptr<net::Exchange> inner, ApiMetrics* metrics, std::string label)
      : inner_(std::move(inner)), metrics_(metrics), label_(std::move(label)) {}

  void Init() {
    std::weak_ptr<MeteredExchange> weak = weak_from_this();
    inner_->SetCloseHandler([weak] {
      auto self = weak.lock();
      if (!self) return;
      self->Record(499);
      if (self->on_close_) self->on_close_();
    });
  }

  const net::HttpRequest& request() const override { return inner_->request(); }
  void Respond(net::HttpResponse response) override {
    const int status = response.status;
    inner_->Respond(std::move(response));
    Record(status);
  }
  void StartStream(int status, std::string content_type) override {
    status_ = status;
    inner_->StartStream(status, std::move(content_type));
  }
  void Write(std::string data) override { inner_->Write(std::move(data)); }
  void EndStream() override {
    inner_->EndStream();
    Record(status_);
  }
  bool closed() const override { return inner_->closed(); }
  void Post(std::function<void()> task) override { inner_->Post(std::move(task)); }
  void SetCloseHandler(std::function<void()> handler) override { on_close_ = std::move(handler); }
  double start_seconds() const override { return inner_->start_seconds(); }

 private:
  void Record(int status) {
    if (recorded_ || !metrics_) return;
    recorded_ = true;
    metrics_->RecordRequest(label_, status, base::MonotonicSeconds() - inner_->start_seconds());
  }

  std::shared_ptr<net::Exchange> inner_;
  ApiMetrics* metrics_;
  std::string label_;
  std::function<void()> on_close_;
  int status_ = 200;
  bool recorded_ = false;
};

}  // namespace

bool Router::Route::Matches(const std::string& p) const {
  if (!path.empty() && path.back() == '*') return p.size() >= path.size() && p.compare(0, path.size() - 1, path, 0, path.size() - 1) == 0;
  return p == path;
}

void Router::Add(std::string method, std::string path, std::string label, Handler handler, bool needs_key) {
  routes_.push_back(Route{std::move(method), std::move(path), std::move(label), std::move(handler), needs_key});
}

void Router::Handle(std::shared_ptr<net::Exchange> exchange) const {
  const net::HttpRequest& req = exchange->request();
  std::string allow;
  for (const Route& r : routes_) {
    if (!r.Matches(req.path)) continue;
    if (r.method == req.method) {
      auto metered = std::make_shared<MeteredExchange>(std::move(exchange), metrics_, r.label);
      metered->Init();
      if (r.needs_key && keys_ != nullptr && keys_->enabled() && keys_->Find(req) == nullptr) {
        net::ApiError e = net::InvalidRequest("Incorrect or missing API key: send \"Authorization: Bearer <key>\"", "",
                                    "invalid_api_key");
        e.status = 401;
        e.type = "authentication_error";
        metered->Respond(net::ErrorResponse(e));
        return;
      }
      r.handler(metered);
      return;
    }
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
  }
  MeteredExchange metered(exchange, metrics_, "other");
  if (allow.empty()) {
    net::ApiError e = net::InvalidRequest("Unknown request URL: " + req.method + " " + req.path, "", "unknown_url");
    e.status = 404;
    metered.Respond(net::ErrorResponse(e));
    return;
  }
  net::ApiError e = net::InvalidRequest("Method " + req.method + " is not allowed for " + req.path + " (allowed: " + allow + ")", "",
                              "method_not_allowed");
  e.status = 405;
  net::HttpResponse r = net::ErrorResponse(e);
  r.headers.emplace_back("Allow", allow);
  metered.Respond(std::move(r));
}

}  // namespace flashserve::api
