// The HTTP server in-process on 127.0.0.1 (any free port) against a scripted Service, spoken to
// with raw sockets: keep-alive, routing errors, SSE over chunked encoding, body limits, bad
// HTTP, 100-continue, disconnect cancellation, concurrent streams and the metrics page.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <thread>

#include "api/api_server.h"
#include "api/api_test_util.h"
#include "base/clock.h"

namespace flashserve::api {
namespace {

using testing::Bytes;
using testing::FakeService;

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  // Reads one response. `on_chunk` sees each chunk of a chunked body; returning false stops
  // reading there.
  Response Read(const std::function<bool(const std::string&)>& on_chunk = nullptr) {
    Response r;
    if (!Fill("\r\n\r\n")) return r;
    const size_t head_end = buf_.find("\r\n\r\n");
    std::string head = buf_.substr(0, head_end);
    buf_.erase(0, head_end + 4);
    r.status = std::atoi(head.substr(9, 3).c_str());
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
      const size_t next = head.find("\r\n", pos + 2);
      const std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      r.headers[name] = line.substr(colon + 2);
      pos = next;
    }
    if (r.headers.count("content-length")) {
      const size_t len = std::stoul(r.headers["content-length"]);
      while (buf_.size() < len && Recv()) {
      }
      r.body = buf_.substr(0, len);
      buf_.erase(0, std::min(len, buf_.size()));
    } else if (r.headers["transfer-encoding"] == "chunked") {
      for (;;) {
        if (!Fill("\r\n")) break;
        const size_t size = std::stoul(buf_.substr(0, buf_.find("\r\n")), nullptr, 16);
        buf_.erase(0, buf_.find("\r\n") + 2);
        while (buf_.size() < size + 2 && Recv()) {
        }
        const std::string chunk = buf_.substr(0, size);
        buf_.erase(0, size + 2);
        if (size == 0) break;
        r.body += chunk;
        if (on_chunk && !on_chunk(chunk)) break;
      }
    }
    return r;
  }
  // True when the server closed the connection (nothing more to read).
  bool AtEof() {
    if (!buf_.empty()) return false;
    return !Recv();
  }

 private:
  bool Recv() {
    char tmp[8192];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  bool Fill(const char* until) {
    while (buf_.find(until) == std::string::npos)
      if (!Recv()) return false;
    return true;
  }
  int fd_ = -1;
  std::string buf_;
};

std::string Post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}
std::string Get(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra_headers + "\r\n";
}

std::string ChatBody(bool stream, int max_tokens = 100) {
  nlohmann::json body = {{"model", "test-model"},
                         {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                         {"thinking", {{"type", "disabled"}}},
                         {"stream", stream},
                         {"max_tokens", max_tokens}};
  return body.dump();
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = testing::ByteTokenizer();
    service_.reply = Bytes("Hello world");
    ApiConfig config;
    config.http.port = 0;
    config.http.max_body_bytes = 4096;
    server_ = std::make_unique<ApiServer>(config, service_, *tok_);
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    service_.StopThread();
    server_->Stop();
    service_.Reset();
    server_.reset();
  }

  FakeService service_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Client c(port_);
  c.Send(Get("/health"));
  Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "keep-alive");
  EXPECT_EQ(nlohmann::json::parse(r.body)["status"], "ok");
  c.Send(Get("/v1/models"));
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(r.body)["data"][0]["id"], "test-model");
  c.Send(Get("/v1/models/test-model?x=1"));
  EXPECT_EQ(c.Read().status, 200);
  c.Send(Get("/v1/models/nope"));
  EXPECT_EQ(c.Read().status, 404);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrderAndConnectionCloseIsHonoured) {
  service_.StartThread(std::chrono::microseconds(200));
  Client c(port_);
  c.Send(Post("/v1/chat/completions", ChatBody(false)) + Get("/health") +
         "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  Response chat = c.Read();
  ASSERT_EQ(chat.status, 200);
  EXPECT_EQ(nlohmann::json::parse(chat.body)["object"], "chat.completion");
  Response health = c.Read();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(nlohmann::json::parse(health.body)["status"], "ok");
  Response models = c.Read();
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.headers["connection"], "close");
  EXPECT_TRUE(c.AtEof());
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Out of file descriptors, accept fails while connections wait in the backlog: the server
// neither spins on it nor stops accepting, and serves them once descriptors are free again.
TEST_F(HttpServerTest, OutOfFileDescriptorsNeitherSpinsNorStopsServing) {
  constexpr int kClients = 3;
  int fds[kClients];
  for (int& fd : fds) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit none = old;
  const int lowest_free = dup(0);  // every descriptor below it is in use
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  none.rlim_cur = static_cast<rlim_t>(lowest_free);  // no descriptor to spare
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &none), 0);
  const int spare = dup(0);
  EXPECT_EQ(spare, -1);
  EXPECT_EQ(errno, EMFILE);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int fd : fds) EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const double cpu = CpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double spent = CpuSeconds() - cpu;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_LT(spent, 0.1) << "the acceptor spun on a failing accept";
  for (int fd : fds) {
    const std::string get = Get("/health");
    ASSERT_EQ(send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
    char buf[512];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 12);
    EXPECT_EQ(std::string(buf, 12), "HTTP/1.1 200");
    close(fd);
  }
}

TEST_F(HttpServerTest, UnknownRouteIs404AndWrongMethodIs405) {
  Client c(port_);
  c.Send(Get("/v2/whatever"));
  Response r = c.Read();
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "unknown_url");
  c.Send(Get("/v1/chat/completions"));
  r = c.Read();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
}

TEST_F(HttpServerTest, EachDialectAnswersErrorsInItsOwnShape) {
  Client c(port_);
  for (const char* path : {"/v1/messages", "/anthropic/v1/messages", "/anthropic/messages", "/v1/messages/count_tokens"}) {
    c.Send(Post(path, "{\"model\": \"test-model\", \"max_tokens\": 8}"));
    Response r = c.Read();
    EXPECT_EQ(r.status, 400) << path;
    const auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["type"], "error") << r.body;
    EXPECT_EQ(body["error"]["type"], "invalid_request_error") << r.body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find("messages"), std::string::npos) << r.body;
  }
  c.Send(Get("/v1/messages"));
  Response r = c.Read();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(nlohmann::json::parse(r.body)["type"], "error") << r.body;
  c.Send(Post("/anthropic/v1/unknown", "{}"));  // refused before any route: still Anthropic's shape
  r = c.Read();
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "not_found_error") << r.body;
  c.Send(Post("/v1/responses", "{\"model\": \"test-model\"}"));
  r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["param"], "input") << r.body;
}

TEST_F(HttpServerTest, ChatCompletionAndErrorsKeepTheConnectionServing) {
  service_.StartThread(std::chrono::microseconds(0));
  Client c(port_);
  c.Send(Post("/v1/chat/completions", "{\"model\": "));
  Response r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "invalid_json");
  c.Send(Post("/v1/chat/completions", "{\"model\": \"test-model\", \"messages\": [{\"role\": \"user\", \"content\": \"\xFF\"}]}"));
  EXPECT_EQ(c.Read().status, 400);
  c.Send(Post("/chat/completions", ChatBody(false)));  // DeepSeek's path without /v1
  r = c.Read();
  ASSERT_EQ(r.status, 200) << r.body;
  nlohmann::json j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello world");
  EXPECT_EQ(j["usage"]["completion_tokens"], 11);
}

TEST_F(HttpServerTest, StreamIsChunkedSse) {
  service_.StartThread(std::chrono::microseconds(0));
  Client c(port_);
  c.Send(Post("/v1/chat/completions", ChatBody(true)));
  Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  ASSERT_GE(r.body.size(), 14u);
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  std::string content;
  size_t pos = 0;
  while ((pos = r.body.find("data: {", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", pos);
    nlohmann::json f = nlohmann::json::parse(r.body.substr(pos + 6, end - pos - 6));
    content += f["choices"][0]["delta"].value("content", "");
    pos = end;
  }
  EXPECT_EQ(content, "Hello world");
  c.Send(Get("/health"));  // the connection is still usable after a stream
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(HttpServerTest, OversizedBodyIs413AndClosesTheConnection) {
  Client c(port_);
  const std::string big(5000, 'x');
  c.Send(Post("/v1/chat/completions", big));
  Response r = c.Read();
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "request_too_large");
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(c.AtEof());
  Client again(port_);  // the server keeps serving, and counted the refusal
  again.Send(Get("/metrics"));
  Response m = again.Read();
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("flashserve_http_requests_total{route=\"other\",status=\"413\"} 1"), std::string::npos);
}

TEST_F(HttpServerTest, OversizedBodyOnAnthropicsPathIs413InItsShape) {
  Client c(port_);
  c.Send(Post("/v1/messages?beta=true", std::string(5000, 'x')));
  Response r = c.Read();
  EXPECT_EQ(r.status, 413);
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["type"], "error") << r.body;
  EXPECT_EQ(body["error"]["type"], "request_too_large") << r.body;
}

TEST_F(HttpServerTest, GarbageIs400AndExpectContinueWorks) {
  Client bad(port_);
  bad.Send("THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(bad.Read().status, 400);
  service_.StartThread(std::chrono::microseconds(0));
  Client c(port_);
  const std::string body = ChatBody(false);
  c.Send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(c.Read().status, 100);
  c.Send(body);
  EXPECT_EQ(c.Read().status, 200);
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamCancelsTheRequest) {
  service_.reply = Bytes(std::string(2000, 'z'));
  service_.StartThread(std::chrono::microseconds(2000));
  {
    Client c(port_);
    c.Send(Post("/v1/chat/completions", ChatBody(true, 3000)));
    int chunks = 0;
    c.Read([&](const std::string&) { return ++chunks < 3; });
    EXPECT_EQ(chunks, 3);
  }  // closes the socket mid-stream
  const double deadline = base::MonotonicSeconds() + 5;
  while (service_.Cancelled().empty() && base::MonotonicSeconds() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(service_.Cancelled().size(), 1u);
  EXPECT_EQ(service_.Cancelled()[0], service_.submitted[0].id);
  EXPECT_TRUE(server_->WaitIdle(2.0));
}

TEST_F(HttpServerTest, ManyConcurrentStreams) {
  service_.StartThread(std::chrono::microseconds(50));
  constexpr int kClients = 16;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&] {
      Client c(port_);
      c.Send(Post("/v1/chat/completions", ChatBody(true)));
      Response r = c.Read();
      if (r.status == 200 && r.body.find("data: [DONE]") != std::string::npos &&
          r.body.find("\"finish_reason\":\"stop\"") != std::string::npos)
        ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients);
  EXPECT_TRUE(server_->WaitIdle(2.0));
}

TEST_F(HttpServerTest, MetricsCountRequestsAndTokens) {
  service_.StartThread(std::chrono::microseconds(0));
  Client c(port_);
  c.Send(Post("/v1/chat/completions", ChatBody(true)));
  EXPECT_EQ(c.Read().status, 200);
  c.Send(Get("/nowhere"));
  EXPECT_EQ(c.Read().status, 404);
  c.Send(Get("/metrics"));
  Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"].rfind("text/plain", 0), 0u);
  for (const char* line : {"flashserve_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1",
                           "flashserve_http_requests_total{route=\"other\",status=\"404\"} 1",
                           "flashserve_time_to_first_token_seconds_count 1", "flashserve_inter_token_latency_seconds_count 10",
                           "flashserve_running_sequences 2", "flashserve_prompt_tokens_total 42",
                           "flashserve_state_pool_capacity_bytes 1000"})
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
}

}  // namespace
}  // namespace flashserve::api

namespace flashserve::api {
namespace {

TEST(HttpServerKeysTest, GenerationRoutesNeedAKeyAndTheKeyChoosesTenantAndRetention) {
  auto tok = testing::ByteTokenizer();
  FakeService service;
  service.reply = Bytes("Hi");
  ApiConfig config;
  config.http.port = 0;
  config.api_keys = {meter::ParseApiKey("sk-acme-0001:acme:agent").value(), meter::ParseApiKey("sk-beta-0002:beta").value()};
  ApiServer server(config, service, *tok);
  ASSERT_TRUE(server.Start().ok());
  service.StartThread(std::chrono::microseconds(0));
  Client c(server.port());
  c.Send(Post("/v1/chat/completions", ChatBody(false)));
  Response r = c.Read();
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "authentication_error");
  c.Send(Post("/v1/chat/completions", ChatBody(false), "Authorization: Bearer sk-wrong-0000\r\n"));
  EXPECT_EQ(c.Read().status, 401);
  c.Send(Post("/v1/messages", "{}"));  // Anthropic's shape on its route
  r = c.Read();
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "authentication_error") << r.body;
  EXPECT_NE(r.body.find("x-api-key"), std::string::npos) << r.body;
  c.Send(Get("/health"));  // health and metrics stay open
  EXPECT_EQ(c.Read().status, 200);
  c.Send(Post("/v1/chat/completions", ChatBody(false), "Authorization: Bearer sk-acme-0001\r\n"));
  ASSERT_EQ(c.Read().status, 200);
  c.Send(Post("/v1/chat/completions", ChatBody(false), "x-api-key: sk-beta-0002\r\n"));
  ASSERT_EQ(c.Read().status, 200);
  nlohmann::json explicit_ttl = nlohmann::json::parse(ChatBody(false));
  explicit_ttl["cache_ttl"] = "chat";
  c.Send(Post("/v1/chat/completions", explicit_ttl.dump(), "Authorization: Bearer sk-acme-0001\r\n"));
  ASSERT_EQ(c.Read().status, 200);
  service.StopThread();
  server.Stop();
  ASSERT_EQ(service.submitted.size(), 3u);
  EXPECT_EQ(service.submitted[0].cache_namespace, "tenant:acme");
  EXPECT_EQ(service.submitted[0].ttl_class, "agent");  // the key's default
  EXPECT_EQ(service.submitted[1].cache_namespace, "tenant:beta");
  EXPECT_EQ(service.submitted[1].ttl_class, "");       // server default
  EXPECT_EQ(service.submitted[2].ttl_class, "chat");   // the request's own choice wins
}

TEST(HttpServerKeysTest, AdminRoutesNeedAnAdminKeyNeverATenantKey) {
  auto tok = testing::ByteTokenizer();
  FakeService service;
  ApiConfig off;
  off.http.port = 0;
  off.api_keys = {meter::ParseApiKey("sk-acme-0001:acme").value()};
  {
    ApiServer server(off, service, *tok);
    ASSERT_TRUE(server.Start().ok());
    Client c(server.port());
    c.Send(Get("/admin/usage", "Authorization: Bearer sk-acme-0001\r\n"));
    Response r = c.Read();
    EXPECT_EQ(r.status, 403);  // no admin key configured: the routes are off
    EXPECT_NE(r.body.find("--admin-key"), std::string::npos) << r.body;
    server.Stop();
  }
  ApiConfig on = off;
  on.admin_keys = {meter::ParseApiKey("adm-000000001").value()};
  ApiServer server(on, service, *tok);
  ASSERT_TRUE(server.Start().ok());
  Client c(server.port());
  c.Send(Get("/admin/usage", "Authorization: Bearer sk-acme-0001\r\n"));
  EXPECT_EQ(c.Read().status, 401);  // a tenant key never reaches them
  c.Send(Get("/admin/usage"));
  EXPECT_EQ(c.Read().status, 401);
  c.Send(Get("/admin/usage", "Authorization: Bearer adm-000000001\r\n"));
  Response r = c.Read();
  EXPECT_EQ(r.status, 404);  // admitted; no metering store behind it
  EXPECT_NE(r.body.find("--meter-db"), std::string::npos) << r.body;
  c.Send(Post("/v1/chat/completions", ChatBody(false), "Authorization: Bearer adm-000000001\r\n"));
  EXPECT_EQ(c.Read().status, 401);  // and an admin key is not a tenant key
  server.Stop();
}

}  // namespace
}  // namespace flashserve::api

namespace flashserve::api {
namespace {

TEST(HttpServerTimeoutTest, IdleTimeoutNeverCutsAResponseInProgress) {
  auto tok = testing::ByteTokenizer();
  FakeService service;
  service.reply = Bytes("twenty-bytes-replyyy");
  ApiConfig config;
  config.http.port = 0;
  config.http.idle_timeout_seconds = 1;
  ApiServer server(config, service, *tok);
  ASSERT_TRUE(server.Start().ok());
  service.StartThread(std::chrono::microseconds(150000));  // ~3 s of streaming
  Client c(server.port());
  c.Send(Post("/v1/chat/completions", ChatBody(true)));
  Response r = c.Read();
  EXPECT_EQ(r.status, 200);
  ASSERT_GE(r.body.size(), 14u);
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  c.Send(Post("/v1/chat/completions", ChatBody(false)));  // non-streamed, also longer than the timeout
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  service.StopThread();
  server.Stop();
}

}  // namespace
}  // namespace flashserve::api
