// The HTTP client against a server that never answers: a request whose cancellation test turns
// true is abandoned within the watch interval (its connection dropped, which the server sees as
// its client leaving), not after the read timeout; one without a test waits for its answer.
#include "net/http_client.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "net/http_server.h"

namespace flashserve::net {
namespace {

namespace asio = boost::asio;

// Answers "/ok" at once, "/late" after 0.4 s, and holds every other request until its client leaves.
class SilentServer {
 public:
  SilentServer() {
    HttpServerConfig config;
    config.host = "127.0.0.1";
    config.port = 0;
    server_ = std::make_unique<HttpServer>(config, [this](std::shared_ptr<Exchange> ex) {
      if (ex->request().path == "/ok") return ex->Respond({200, "text/plain", "ok", {}});
      if (ex->request().path == "/late") {
        ex->PostAfter(0.4, [ex] { ex->Respond({200, "text/plain", "late", {}}); });
        return;
      }
      ex->SetCloseHandler([this] { client_left = true; });
      held_ = ex;
    });
    EXPECT_TRUE(server_->Start().ok());
  }
  ~SilentServer() { server_->Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  std::atomic<bool> client_left{false};

 private:
  std::unique_ptr<HttpServer> server_;
  std::shared_ptr<Exchange> held_;
};

HttpOutcome PostAndWait(const std::string& url, const std::string& path, std::function<bool()> cancelled) {
  asio::io_context ioc;
  HttpClient client(ioc.get_executor(), *ParseBaseUrl(url), "", 30.0);
  std::optional<HttpOutcome> out;
  RequestExtras extras;
  extras.cancelled = std::move(cancelled);
  asio::co_spawn(ioc, client.Post(path, "{}", nullptr, std::move(extras)),
                 [&](std::exception_ptr, HttpOutcome o) { out = std::move(o); });
  ioc.run();
  EXPECT_TRUE(out.has_value());
  return out.value_or(HttpOutcome{});
}

TEST(HttpClientTest, ACancelledRequestStopsWaitingForTheHeadAtOnce) {
  SilentServer server;
  const double start = base::MonotonicSeconds();
  const HttpOutcome out = PostAndWait(server.url(), "/held", [&] { return base::MonotonicSeconds() - start > 0.3; });
  const double waited = base::MonotonicSeconds() - start;
  ASSERT_TRUE(out.transport.has_value());
  EXPECT_EQ(out.transport->code(), base::ErrorCode::kCancelled) << out.transport->ToString();
  EXPECT_LT(waited, 2.0) << "not the 30 s read timeout";
  for (int i = 0; i < 200 && !server.client_left; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(server.client_left) << "the server saw the connection go";
}

TEST(HttpClientTest, ARequestThatIsNotCancelledGetsItsAnswer) {
  SilentServer server;
  const HttpOutcome out = PostAndWait(server.url(), "/late", [] { return false; });
  EXPECT_FALSE(out.transport.has_value()) << out.transport->ToString();
  EXPECT_EQ(out.status, 200);
}

// A silent server times a request out once: the client does not retry on a fresh connection
// (as it does when a reused idle connection turns out closed), which would double the wait;
// the router's health polls rely on it to mark a paused worker down within their timeout.
TEST(HttpClientTest, ATimeoutOnAReusedConnectionIsNotRetried) {
  SilentServer server;
  asio::io_context ioc;
  HttpClient client(ioc.get_executor(), *ParseBaseUrl(server.url()), "", 1.0);
  std::optional<HttpOutcome> first, held;
  double waited = 0;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    first = co_await client.Post("/ok", "{}", nullptr);
    const double start = base::MonotonicSeconds();
    held = co_await client.Post("/held", "{}", nullptr);
    waited = base::MonotonicSeconds() - start;
  }, asio::detached);
  ioc.run();
  ASSERT_TRUE(first && held);
  EXPECT_EQ(first->status, 200);
  ASSERT_TRUE(held->transport.has_value());
  EXPECT_EQ(held->transport->code(), base::ErrorCode::kTimeout) << held->transport->ToString();
  EXPECT_LT(waited, 1.9) << "one timeout, not two";
  EXPECT_EQ(client.num_connections_opened(), 1);
}

}  // namespace
}  // namespace flashserve::net
