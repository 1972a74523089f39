// Test double for the loadgen runner tests (not part of fs_loadgen): a scripted
// OpenAI-compatible streaming server on 127.0.0.1 (port 0), one thread per connection, that
// records every body and header of interest; plus BenchConfig / RunBenchmark helpers.
#pragma once

#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/runner.h"

namespace flashserve::loadgen::testing {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Json = nlohmann::json;

// What the fake server does with one request.
struct Script {
  int status = 200;
  std::string retry_after;          // Retry-After header of a non-200 response
  std::string error_body = R"({"error":{"message":"boom"}})";
  std::vector<std::string> pieces = {"a", "b"};  // one streamed delta each
  int first_delay_ms = 0;           // before the first delta
  int gap_ms = 0;                   // before every later delta
  int stall_ms = 0;                 // before the response head
  int64_t prompt_tokens = 10, cached_tokens = 0;
  bool drop_after_first = false;    // close the connection after the first delta
  bool error_event = false;         // an in-stream error object after the first delta
};

class FakeServer {
 public:
  using Handler = std::function<Script(int request_idx, const Json& body)>;
  explicit FakeServer(Handler handler) : handler_(std::move(handler)), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~FakeServer() {
    stop_ = true;
    boost::system::error_code ec;
    tcp::socket wake(io_);
    wake.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
    accept_thread_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Json> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<std::string> auth_headers() {
    std::lock_guard lock(mu_);
    return auth_;
  }
  std::vector<std::string> session_headers() {
    std::lock_guard lock(mu_);
    return sessions_;
  }
  int connections() const { return connections_; }
  int max_active() const { return max_active_; }
  std::string models_body = R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})";
  std::atomic<int> models_status{200};

 private:
  void AcceptLoop() {
    for (;;) {
      auto socket = std::make_shared<tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (stop_ || ec) return;
      socket->set_option(tcp::no_delay(true), ec);
      ++connections_;
      std::lock_guard lock(mu_);
      sockets_.push_back(socket);
      threads_.emplace_back([this, socket] { Serve(*socket); });
    }
  }

  void Serve(tcp::socket& socket) {
    boost::beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;
      if (req.target() == "/v1/models") {
        Write(socket, Head(models_status, "application/json", models_body.size(), "") + models_body);
        continue;
      }
      Json body = Json::parse(req.body(), nullptr, false);
      Script script;
      {
        std::lock_guard lock(mu_);
        bodies_.push_back(body);
        auth_.push_back(std::string(req[http::field::authorization]));
        sessions_.push_back(std::string(req["x-session-id"]));
        script = handler_(next_idx_++, body);
      }
      bool chat = req.target() == "/v1/chat/completions";
      int active = ++active_;
      for (int seen = max_active_; active > seen && !max_active_.compare_exchange_weak(seen, active);) {}
      bool keep = Respond(socket, script, chat);
      --active_;
      if (!keep) return;
    }
  }

  static std::string Head(int status, const char* type, int64_t length, const std::string& retry_after) {
    std::string h = "HTTP/1.1 " + std::to_string(status) + " Scripted\r\nContent-Type: " + type + "\r\n";
    h += length < 0 ? "Transfer-Encoding: chunked\r\n" : "Content-Length: " + std::to_string(length) + "\r\n";
    if (!retry_after.empty()) h += "Retry-After: " + retry_after + "\r\n";
    return h + "\r\n";
  }
  static std::string Chunk(const Json& j) {
    std::string sse = "data: " + j.dump() + "\n\n";
    std::ostringstream size;
    size << std::hex << sse.size();
    return size.str() + "\r\n" + sse + "\r\n";
  }
  static bool Write(tcp::socket& socket, const std::string& bytes) {
    boost::system::error_code ec;
    asio::write(socket, asio::buffer(bytes), ec);
    return !ec;
  }
  static void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  bool Respond(tcp::socket& socket, const Script& s, bool chat) {
    Sleep(s.stall_ms);
    if (s.status != 200)
      return Write(socket, Head(s.status, "application/json", s.error_body.size(), s.retry_after) + s.error_body);
    Write(socket, Head(200, "text/event-stream", -1, ""));
    if (chat) Write(socket, Chunk({{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}}}}));
    for (size_t i = 0; i < s.pieces.size(); ++i) {
      Sleep(i == 0 ? s.first_delay_ms : s.gap_ms);
      Json choice = chat ? Json{{"index", 0}, {"delta", {{"content", s.pieces[i]}}}} : Json{{"index", 0}, {"text", s.pieces[i]}};
      Write(socket, Chunk({{"choices", {choice}}}));
      if (i == 0 && s.drop_after_first) {
        ::shutdown(socket.native_handle(), SHUT_RDWR);
        return false;
      }
      if (i == 0 && s.error_event) Write(socket, Chunk({{"error", {{"message", "engine failed"}}}}));
    }
    Json usage = {{"prompt_tokens", s.prompt_tokens},
                  {"completion_tokens", static_cast<int64_t>(s.pieces.size())},
                  {"prompt_tokens_details", {{"cached_tokens", s.cached_tokens}}}};
    Write(socket, Chunk({{"choices", Json::array()}, {"usage", usage}}));
    std::string done = "data: [DONE]\n\n";
    return Write(socket, "e\r\n" + done + "\r\n0\r\n\r\n");
  }

  Handler handler_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::vector<std::thread> threads_;
  std::vector<Json> bodies_;
  std::vector<std::string> auth_;
  std::vector<std::string> sessions_;
  int next_idx_ = 0;
  std::atomic<int> connections_{0}, active_{0}, max_active_{0};
};

inline BenchConfig Config(const FakeServer& server) {
  BenchConfig c;
  c.base_url = server.url();
  c.model = "m";
  c.concurrency = 1;
  c.timeout_s = 10;
  return c;
}

inline RunResult MustRun(const BenchConfig& c, const Dataset& d) {
  auto r = RunBenchmark(c, d);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  return std::move(r).value();
}

}  // namespace flashserve::loadgen::testing
