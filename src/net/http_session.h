// One HTTP/1.1 connection (internal to the HTTP server): reads requests one at a time, writes
// responses from a queue, and watches the socket while a response is pending so a client that
// leaves cancels its request. Runs on the connection's strand; Shutdown() may be called from any thread.
#pragma once

#include <utility>  // before asio: boost 1.74 awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/api_error.h"
#include "net/exchange.h"
#include "net/http_server.h"

namespace flashserve::net {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace asio = boost::asio;
using tcp = boost::asio::ip::tcp;

class SessionExchange;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<asio::io_context> ioc, const HttpServerConfig& config,
          const HttpServer::Handler& handler, const HttpServer::RejectObserver& on_rejected,
          std::shared_ptr<std::atomic<int64_t>> open_exchanges);
  ~Session();

  void Run();
  // Any thread: closes the connection and drops the PostAfter tasks still waiting or asked for
  // later (the server stops: they would otherwise hold their exchanges, and through them the
  // context, forever).
  void Shutdown();

 private:
  friend class SessionExchange;

  void ReadHeader();
  void OnHeader(beast::error_code ec);
  void OnRequest(beast::error_code ec);
  void OnReadError(beast::error_code ec);
  void Watch();
  void OnWatch(beast::error_code ec, size_t bytes);
  void Enqueue(std::string bytes);
  void DoWrite();
  void OnWrite(beast::error_code ec);
  void Continue();  // after a response is fully written: next request or close
  void EndResponse();
  void SendErrorAndClose(const ApiError& error);
  void GracefulClose();
  void Drain();
  void ClientGone();
  void DoClose();

  std::shared_ptr<asio::io_context> ioc_;  // keeps the context alive while this session lives
  beast::tcp_stream stream_;
  const HttpServerConfig config_;
  const HttpServer::Handler handler_;
  const HttpServer::RejectObserver on_rejected_;
  std::shared_ptr<std::atomic<int64_t>> open_exchanges_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  int64_t out_bytes_ = 0;
  bool writing_ = false;
  bool reading_ = false;          // a request is being read
  bool watching_ = false;         // a disconnect-watch read is pending
  bool responding_ = false;       // an exchange's response has not ended
  bool keep_alive_ = true;
  bool closing_ = false;          // no more requests on this connection
  bool closed_ = false;
  std::shared_ptr<SessionExchange> exchange_;  // the current request
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;  // PostAfter tasks' timers (strand)
  bool shut_down_ = false;                                  // Shutdown ran (strand)
};

}  // namespace flashserve::net
