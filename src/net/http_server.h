// HTTP/1.1 server on Boost.Beast/Asio: acceptor, I/O thread pool, one strand per connection,
// keep-alive, chunked streaming, body limit (413), disconnect detection. Owned by ApiServer and the router;
// Start/Stop from one controlling thread; the handler runs on the connection's strand.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/exchange.h"
#include "base/result.h"

namespace flashserve::net {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                                 // 0 = any free port (see HttpServer::port)
  int io_threads = 2;
  int64_t max_body_bytes = 16ll << 20;             // larger bodies get 413
  int idle_timeout_seconds = 120;                  // keep-alive connections idle this long are closed
  int64_t max_pending_write_bytes = 64ll << 20;    // a client this far behind counts as gone
  base::Status Validate() const;
};

class HttpServer {
 public:
  using Handler = std::function<void(std::shared_ptr<Exchange>)>;
  // Told about requests refused before they reach the handler (400 bad HTTP, 413, 431).
  using RejectObserver = std::function<void(int status)>;

  HttpServer(HttpServerConfig config, Handler handler, RejectObserver on_rejected = nullptr);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the I/O threads. kUnavailable when the address cannot be bound.
  base::Status Start();
  // The bound port (after Start).
  int port() const;
  // Closes the listening socket; open connections keep being served.
  void StopAccepting();
  // Number of exchanges whose response has not ended.
  int64_t num_open_exchanges() const;
  // Closes every connection and joins the I/O threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::net
