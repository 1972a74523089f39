// Remote pictures fetched ahead of the route (api/image_fetch.h).
#include "api/image_fetch.h"

#include <openssl/evp.h>

#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "protocol/image_parts.h"

namespace flashserve::api {

namespace {

using Json = nlohmann::ordered_json;

bool IsRemote(const std::string& source) {
  auto starts = [&](const char* scheme) {
    const size_t n = std::char_traits<char>::length(scheme);
    if (source.size() < n) return false;
    for (size_t i = 0; i < n; ++i)
      if (std::tolower(static_cast<unsigned char>(source[i])) != scheme[i]) return false;
    return true;
  };
  return starts("http://") || starts("https://");
}

std::string DataUrl(const std::vector<uint8_t>& bytes) {
  std::string out = "data:image/*;base64,";  // the decoder reads the format from the bytes
  const size_t head = out.size();
  out.resize(head + 4 * ((bytes.size() + 2) / 3) + 1);
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + head), bytes.data(),
                                static_cast<int>(bytes.size()));
  out.resize(head + static_cast<size_t>(n));
  return out;
}

// The exchange as the route sees it after the fetch: the same connection, the rewritten body.
class RewrittenExchange : public net::Exchange {
 public:
  RewrittenExchange(std::shared_ptr<net::Exchange> inner, std::string body)
      : inner_(std::move(inner)), request_(inner_->request()) {
    request_.body = std::move(body);
  }
  const net::HttpRequest& request() const override { return request_; }
  void Respond(net::HttpResponse response) override { inner_->Respond(std::move(response)); }
  void StartStream(int status, std::string content_type, net::HeaderList headers) override {
    inner_->StartStream(status, std::move(content_type), std::move(headers));
  }
  void Write(std::string data) override { inner_->Write(std::move(data)); }
  void EndStream() override { inner_->EndStream(); }
  bool closed() const override { return inner_->closed(); }
  void Post(std::function<void()> task) override { inner_->Post(std::move(task)); }
  void PostAfter(double seconds, std::function<void()> task) override { inner_->PostAfter(seconds, std::move(task)); }
  void SetCloseHandler(std::function<void()> handler) override { inner_->SetCloseHandler(std::move(handler)); }
  double start_seconds() const override { return inner_->start_seconds(); }

 private:
  std::shared_ptr<net::Exchange> inner_;
  net::HttpRequest request_;
};

}  // namespace

struct ImageFetchStage::Job {
  std::shared_ptr<net::Exchange> exchange;
  net::ErrorDialect errors;
  Route route;
  Json body;
  std::vector<protocol::ImageSourceField> remote;
  std::vector<base::Result<std::vector<uint8_t>>> results;
  std::atomic<size_t> left{0};
};

ImageFetchStage::ImageFetchStage(vision::FetchPolicy policy, int threads, int max_pending, ApiMetrics* metrics)
    : policy_(std::move(policy)), max_pending_(max_pending), metrics_(metrics), pool_(std::max(1, threads)) {}

ImageFetchStage::~ImageFetchStage() { pool_.join(); }

void ImageFetchStage::Handle(const std::shared_ptr<net::Exchange>& exchange, net::ErrorDialect errors,
                             const Route& route) {
  const std::string& text = exchange->request().body;
  if (!policy_.enabled() || text.find("://") == std::string::npos) return route(exchange);
  auto job = std::make_shared<Job>();
  job->body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (job->body.is_discarded()) return route(exchange);  // the route answers the parse error
  for (protocol::ImageSourceField& field : protocol::ImageSourceFields(job->body))
    if (IsRemote(field.value->get_ref<const std::string&>())) job->remote.push_back(std::move(field));
  if (job->remote.empty()) return route(exchange);
  const int n = static_cast<int>(job->remote.size());
  if (pending_.fetch_add(n) + n > max_pending_) {
    pending_.fetch_sub(n);
    return exchange->Respond(net::ErrorResponse(
        net::Unavailable(fmt::format("{} pictures are waiting to be fetched; try again shortly", max_pending_), 1),
        errors));
  }
  job->exchange = exchange;
  job->errors = errors;
  job->route = route;
  job->results.resize(job->remote.size(), base::MakeError(base::ErrorCode::kInternal, "not fetched"));
  job->left = job->remote.size();
  for (size_t i = 0; i < job->remote.size(); ++i) boost::asio::post(pool_, [this, job, i] { Fetch(job, i); });
}

void ImageFetchStage::Fetch(const std::shared_ptr<Job>& job, size_t index) {
  const auto start = std::chrono::steady_clock::now();
  auto& result = job->results[index];
  result = vision::FetchImage(job->remote[index].value->get_ref<const std::string&>(), policy_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const base::ErrorCode code = result.ok() ? base::ErrorCode::kOk : result.error().code();
  const char* outcome = code == base::ErrorCode::kOk                  ? "ok"
                        : code == base::ErrorCode::kResourceExhausted ? "too_large"
                        : code == base::ErrorCode::kInvalidArgument   ? "refused"
                                                                      : "failed";
  if (metrics_ != nullptr) metrics_->RecordImageFetch(outcome, result.ok() ? static_cast<int64_t>(result->size()) : 0, seconds);
  pending_.fetch_sub(1);
  if (job->left.fetch_sub(1) == 1) Finish(job);
}

void ImageFetchStage::Finish(const std::shared_ptr<Job>& job) {
  for (size_t i = 0; i < job->remote.size(); ++i) {
    const auto& result = job->results[i];
    if (result.ok()) continue;
    const std::string& path = job->remote[i].path;
    net::ApiError e = net::InvalidRequest(fmt::format("{}: {}", path, result.error().message()), path, "invalid_image");
    if (result.error().code() == base::ErrorCode::kResourceExhausted) e.code = "image_too_large";
    return job->exchange->Post([job, e] { job->exchange->Respond(net::ErrorResponse(e, job->errors)); });
  }
  for (size_t i = 0; i < job->remote.size(); ++i) *job->remote[i].value = DataUrl(*job->results[i]);
  auto rewritten = std::make_shared<RewrittenExchange>(
      job->exchange, job->body.dump(-1, ' ', false, Json::error_handler_t::replace));
  job->exchange->Post([job, rewritten] {
    if (!job->exchange->closed()) job->route(rewritten);  // a client that left starts nothing
  });
}

}  // namespace flashserve::api
