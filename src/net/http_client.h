// Keep-alive HTTP/1.1 client for one base URL, on a single-threaded Asio executor: POSTs a JSON
// body and hands each piece of the response body to a callback as soon as it arrives. Used by
// the benchmark client and the router. Runs on the executor's thread; idle connections are reused.
#pragma once

#include <utility>  // first: Boost 1.74's awaitable.hpp uses std::exchange without including it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "net/exchange.h"

namespace flashserve::net {

struct Endpoint {
  std::string host;
  std::string port;
  std::string path_prefix;  // "" or "/something" without a trailing slash
};

// "http://host[:port][/prefix]"; kUnimplemented for https, kInvalidArgument otherwise.
base::Result<Endpoint> ParseBaseUrl(std::string_view url);

struct HttpOutcome {
  int32_t status = 0;                   // 0 when no response head arrived
  HeaderList headers;                   // the response head's fields, names as sent
  std::optional<double> retry_after_s;  // Retry-After in its delta-seconds form
  std::string body;                     // the body of a non-200 response (first 64 KiB)
  // Connect, write or read failure, timeout, or a connection closed before the body ended.
  std::optional<base::Error> transport;
};

// Called with every piece of a 200 response's body, on arrival.
using BodyFn = std::function<void(std::string_view piece)>;

// Per-request additions (used by the router's proxy).
struct RequestExtras {
  std::string authorization;        // sent instead of the client's key ("" = the client's key)
  // Checked every 100 ms while the request runs: once true, the pending write or read is
  // cancelled and the connection dropped (kCancelled).
  std::function<bool()> cancelled;
  bool whole_body = false;          // a non-200 body is kept whole, not cut at 64 KiB
  std::vector<std::pair<std::string, std::string>> headers;  // added to the request
  // Told the status and fields once the response head arrives, before any body piece.
  std::function<void(int32_t status, const HeaderList& headers)> on_head;
};

class HttpClient {
 public:
  // timeout_s bounds connecting and every single read or write (not the whole request).
  HttpClient(boost::asio::any_io_executor executor, Endpoint endpoint, std::string api_key, double timeout_s);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POST path_prefix + path with a JSON body. A request whose reused idle connection turns out
  // closed before any response byte is retried once on a fresh connection.
  boost::asio::awaitable<HttpOutcome> Post(std::string path, std::string body, BodyFn on_body,
                                           RequestExtras extras);
  // Without extras. (An overload, not a default argument: GCC 12 frees a defaulted class-type
  // coroutine argument twice.)
  boost::asio::awaitable<HttpOutcome> Post(std::string path, std::string body, BodyFn on_body);
  // GET path_prefix + path; the whole body lands in HttpOutcome::body whatever the status.
  boost::asio::awaitable<HttpOutcome> Get(std::string path);

  int64_t num_connections_opened() const { return num_connections_opened_; }

 private:
  struct Connection;
  struct Exchange;

  boost::asio::awaitable<std::unique_ptr<Connection>> Acquire(bool* reused, HttpOutcome* out);
  boost::asio::awaitable<HttpOutcome> Send(Exchange& exchange);
  boost::asio::awaitable<bool> RunExchange(Connection& conn, Exchange& exchange, HttpOutcome* out, bool* got_head);

  boost::asio::any_io_executor executor_;
  Endpoint endpoint_;
  std::string api_key_;
  double timeout_s_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int64_t num_connections_opened_ = 0;
};

}  // namespace flashserve::net
