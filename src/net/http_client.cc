// Pooled keep-alive HTTP/1.1 client on Boost.Beast (see http_client.h). Every Beast/Asio call
// completes through redirect_error, so failures arrive as error codes, never exceptions.
#include "net/http_client.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace flashserve::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {
constexpr size_t kMaxErrorBody = 64 * 1024;
constexpr size_t kReadPiece = 16 * 1024;

auto Await(error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

base::Error TransportError(std::string_view what, const error_code& ec) {
  if (ec == beast::error::timeout) return base::MakeError(base::ErrorCode::kTimeout, std::string(what) + ": timed out");
  bool dropped = ec == http::error::partial_message || ec == http::error::end_of_stream || ec == asio::error::eof ||
                 ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
  return base::MakeError(dropped ? base::ErrorCode::kUnavailable : base::ErrorCode::kIoError,
                         std::string(what) + ": " + (dropped ? "connection closed by the server" : ec.message()));
}

// While an exchange with a cancellation test runs, the test is checked every 100 ms and, once it
// holds, the connection's pending operation is cancelled: a caller whose own client left stops
// waiting for a response head (a long prefill) or for a silent stream at once.
struct CancelWatch {
  explicit CancelWatch(const asio::any_io_executor& executor) : timer(executor) {}
  asio::steady_timer timer;
  beast::tcp_stream* stream = nullptr;  // null once the exchange is over
};

asio::awaitable<void> WatchForCancel(std::shared_ptr<CancelWatch> watch, std::function<bool()> cancelled) {
  while (watch->stream != nullptr) {
    watch->timer.expires_after(std::chrono::milliseconds(100));
    error_code ec;
    co_await watch->timer.async_wait(Await(ec));
    if (watch->stream == nullptr) co_return;
    // Every tick while it holds: a cancel that lands between two operations (or just after
    // one completed) cancels nothing, and the next operation must be cancelled too.
    if (cancelled()) watch->stream->cancel();
  }
}

// Ends the watch when the exchange returns, however it returns.
struct EndWatchOnExit {
  std::shared_ptr<CancelWatch> watch;
  ~EndWatchOnExit() {
    if (!watch) return;
    watch->stream = nullptr;
    watch->timer.cancel();
  }
};

std::optional<double> ParseRetryAfter(std::string_view value) {
  std::string text(value);
  char* end = nullptr;
  double seconds = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(seconds) || seconds < 0) return std::nullopt;
  return seconds;
}
}  // namespace

base::Result<Endpoint> ParseBaseUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return base::MakeError(base::ErrorCode::kInvalidArgument, "base URL '" + std::string(url) + "': " + why);
  };
  if (url.starts_with("https://"))
    return base::MakeError(base::ErrorCode::kUnimplemented, "base URL: https is not supported, use http://");
  if (!url.starts_with("http://")) return bad("expected http://host[:port][/prefix]");
  std::string_view rest = url.substr(7);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string prefix(slash == std::string_view::npos ? "" : rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (prefix.ends_with("/v1")) prefix.resize(prefix.size() - 3);  // OpenAI SDK style ".../v1"
  Endpoint ep;
  ep.path_prefix = prefix;
  size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']', colon) == std::string_view::npos) {
    ep.host = std::string(authority.substr(0, colon));
    ep.port = std::string(authority.substr(colon + 1));
  } else {
    ep.host = std::string(authority);
    ep.port = "80";
  }
  if (ep.host.size() > 2 && ep.host.front() == '[' && ep.host.back() == ']') ep.host = ep.host.substr(1, ep.host.size() - 2);
  if (ep.host.empty()) return bad("missing host");
  char* end = nullptr;
  long port = std::strtol(ep.port.c_str(), &end, 10);
  if (ep.port.empty() || *end != '\0' || port < 1 || port > 65535) return bad("bad port '" + ep.port + "'");
  return ep;
}

struct HttpClient::Connection {
  explicit Connection(asio::any_io_executor executor) : stream(std::move(executor)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

struct HttpClient::Exchange {
  http::verb verb = http::verb::get;
  std::string path;
  std::string body;
  BodyFn on_body;  // null: the whole body goes to HttpOutcome::body
  RequestExtras extras;
};

HttpClient::HttpClient(asio::any_io_executor executor, Endpoint endpoint, std::string api_key, double timeout_s)
    : executor_(std::move(executor)), endpoint_(std::move(endpoint)), api_key_(std::move(api_key)),
      timeout_s_(timeout_s) {}

HttpClient::~HttpClient() = default;

asio::awaitable<HttpOutcome> HttpClient::Post(std::string path, std::string body, BodyFn on_body,
                                              RequestExtras extras) {
  Exchange exchange;
  exchange.verb = http::verb::post;
  exchange.path = std::move(path);
  exchange.body = std::move(body);
  exchange.on_body = std::move(on_body);
  exchange.extras = std::move(extras);
  co_return co_await Send(exchange);
}

asio::awaitable<HttpOutcome> HttpClient::Post(std::string path, std::string body, BodyFn on_body) {
  RequestExtras extras;
  return Post(std::move(path), std::move(body), std::move(on_body), std::move(extras));
}

asio::awaitable<HttpOutcome> HttpClient::Get(std::string path) {
  Exchange exchange;
  exchange.verb = http::verb::get;
  exchange.path = std::move(path);
  co_return co_await Send(exchange);
}

asio::awaitable<std::unique_ptr<HttpClient::Connection>> HttpClient::Acquire(bool* reused, HttpOutcome* out) {
  if (*reused && !idle_.empty()) {
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    co_return conn;
  }
  *reused = false;
  error_code ec;
  tcp::resolver resolver(executor_);
  auto results = co_await resolver.async_resolve(endpoint_.host, endpoint_.port, Await(ec));
  std::string where = endpoint_.host + ":" + endpoint_.port;
  if (ec) {
    out->transport = base::MakeError(base::ErrorCode::kUnavailable, "resolving " + where + ": " + ec.message());
    co_return nullptr;
  }
  auto conn = std::make_unique<Connection>(executor_);
  conn->stream.expires_after(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(timeout_s_)));
  co_await conn->stream.async_connect(results, Await(ec));
  if (ec) {
    out->transport = ec == beast::error::timeout
                         ? base::MakeError(base::ErrorCode::kTimeout, "connecting to " + where + ": timed out")
                         : base::MakeError(base::ErrorCode::kUnavailable, "connecting to " + where + ": " + ec.message());
    co_return nullptr;
  }
  conn->stream.socket().set_option(tcp::no_delay(true), ec);
  ++num_connections_opened_;
  co_return conn;
}

asio::awaitable<HttpOutcome> HttpClient::Send(Exchange& exchange) {
  for (int attempt = 0;; ++attempt) {
    HttpOutcome out;
    bool reused = attempt == 0;  // in: may reuse an idle connection; out: did
    auto conn = co_await Acquire(&reused, &out);
    if (!conn) co_return out;
    bool got_head = false;
    bool keep_alive = co_await RunExchange(*conn, exchange, &out, &got_head);
    if (!out.transport) {
      if (keep_alive) idle_.push_back(std::move(conn));
      co_return out;
    }
    // An idle connection the server already closed fails before any response byte: retry once.
    // Not after a timeout: a server that is alive but silent (paused, hung) would cost the
    // caller the timeout twice.
    const bool closed_idle = reused && !got_head && attempt == 0 && out.transport->code() != base::ErrorCode::kTimeout &&
                             out.transport->code() != base::ErrorCode::kCancelled;
    if (!closed_idle) co_return out;
  }
}

asio::awaitable<bool> HttpClient::RunExchange(Connection& conn, Exchange& exchange, HttpOutcome* out,
                                              bool* got_head) {
  auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(timeout_s_));
  http::request<http::string_body> req{exchange.verb, endpoint_.path_prefix + exchange.path, 11};
  req.set(http::field::host, endpoint_.host + ":" + endpoint_.port);
  req.set(http::field::user_agent, "flashserve");
  if (exchange.verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
  }
  for (const auto& [name, value] : exchange.extras.headers) req.set(name, value);
  if (!exchange.extras.authorization.empty()) req.set(http::field::authorization, exchange.extras.authorization);
  else if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
  req.keep_alive(true);
  req.body() = exchange.body;
  req.prepare_payload();
  EndWatchOnExit end_watch;
  if (exchange.extras.cancelled) {
    end_watch.watch = std::make_shared<CancelWatch>(executor_);
    end_watch.watch->stream = &conn.stream;
    asio::co_spawn(executor_, WatchForCancel(end_watch.watch, exchange.extras.cancelled), asio::detached);
  }
  const auto cancelled = [&] { return exchange.extras.cancelled && exchange.extras.cancelled(); };
  const auto cancel_error = [] { return base::MakeError(base::ErrorCode::kCancelled, "cancelled by the caller"); };
  error_code ec;
  conn.stream.expires_after(timeout);
  co_await http::async_write(conn.stream, req, Await(ec));
  if (ec) {
    out->transport = cancelled() ? cancel_error() : TransportError("sending the request", ec);
    co_return false;
  }
  if (cancelled()) {
    out->transport = cancel_error();
    co_return false;
  }
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Boost 1.74 compares a Content-Length against an empty optional as exceeded.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  conn.stream.expires_after(timeout);
  co_await http::async_read_header(conn.stream, conn.buffer, parser, Await(ec));
  if (ec) {
    out->transport = cancelled() ? cancel_error() : TransportError("reading the response head", ec);
    co_return false;
  }
  *got_head = true;
  out->status = static_cast<int32_t>(parser.get().result_int());
  if (auto it = parser.get().find(http::field::retry_after); it != parser.get().end())
    out->retry_after_s = ParseRetryAfter(std::string_view(it->value().data(), it->value().size()));
  for (const auto& field : parser.get()) out->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  if (exchange.extras.on_head) exchange.extras.on_head(out->status, out->headers);
  bool to_callback = out->status == 200 && exchange.on_body;
  char piece[kReadPiece];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    conn.stream.expires_after(timeout);
    co_await http::async_read_some(conn.stream, conn.buffer, parser, Await(ec));
    if (ec == http::error::need_buffer) ec = {};
    size_t n = sizeof(piece) - parser.get().body().size;
    if (n > 0 && to_callback) exchange.on_body(std::string_view(piece, n));
    if (n > 0 && !to_callback) {
      const size_t room = exchange.extras.whole_body ? n : kMaxErrorBody - std::min(kMaxErrorBody, out->body.size());
      out->body.append(piece, std::min(n, room));
    }
    if (cancelled()) {
      out->transport = cancel_error();
      co_return false;
    }
    if (ec) {
      out->transport = TransportError("reading the response body", ec);
      co_return false;
    }
  }
  co_return parser.keep_alive();
}

}  // namespace flashserve::net
