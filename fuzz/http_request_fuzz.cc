// HTTP requests from the network through a running API server (on 127.0.0.1, a scripted
// Service behind it): raw request bytes, or a JSON body framed as a POST to one of the routes
// (chat, completions, messages, count_tokens, responses, tokenize, detokenize). Whatever a
// request does, it is never answered 500 (an exception a handler let through), the server
// answers the next client's GET /health with 200, and it ends idle (nothing left pending).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "api/api_server.h"
#include "api/fake_service.h"

namespace {

namespace api = flashserve::api;

struct Server {
  api::testing::FakeService service;
  std::unique_ptr<flashserve::tokenizer::Tokenizer> tokenizer = api::testing::ByteTokenizer();
  std::unique_ptr<api::ApiServer> http;
  Server() {
    if (!tokenizer) std::abort();
    api::ApiConfig config;
    config.http.port = 0;
    config.http.max_body_bytes = 64 * 1024;
    http = std::make_unique<api::ApiServer>(config, service, *tokenizer);
    if (!http->Start().ok()) std::abort();
    service.StartThread(std::chrono::microseconds(0));
  }
};

Server& TheServer() {
  static Server* server = new Server();  // lives until exit: the fuzzer never returns
  return *server;
}

// Sends `request` and reads until the server closes (or 5 s pass). half_close: ends the
// sending side at once (raw bytes: the server then sees the end of the stream); a framed
// request keeps it open, as a client waiting for its answer does (a closed side reads as a
// client that left, which cancels the request before any response is written).
std::string Exchange(int port, const std::string& request, bool half_close) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) __builtin_trap();  // server gone
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (half_close) shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  return reply;
}

const char* const kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
                               "/v1/responses", "/tokenize", "/detokenize"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Server& server = TheServer();
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string request;
  if (data[0] & 1) {
    const char* route = kRoutes[(data[0] >> 1) % (sizeof kRoutes / sizeof kRoutes[0])];
    request = std::string("POST ") + route + " HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n" +
              "Connection: close\r\nContent-Length: " + std::to_string(rest.size()) + "\r\n\r\n" + rest;
  } else {
    request = rest;
  }
  const std::string reply = Exchange(server.http->port(), request, /*half_close=*/(data[0] & 1) == 0);
  if (reply.rfind("HTTP/1.1 500", 0) == 0) __builtin_trap();  // a handler threw
  const std::string health =
      Exchange(server.http->port(), "GET /health HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n", false);
  if (health.rfind("HTTP/1.1 200", 0) != 0) __builtin_trap();
  if (!server.http->WaitIdle(2)) __builtin_trap();  // a request still pending: something leaked it
  server.service.Reset();
  return 0;
}
