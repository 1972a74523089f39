// One HTTP/1.1 connection and its exchanges (net/http_session.h).
#include "net/http_session.h"

#include <boost/asio/steady_timer.hpp>

#include <chrono>

#include "net/api_error.h"
#include "net/http_wire.h"
#include "base/clock.h"
#include "base/log.h"

namespace flashserve::net {

namespace {
constexpr size_t kHeaderLimit = 64 * 1024;
constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kMaxBufferedAhead = 1 << 20;  // pipelined bytes read while a response is pending
constexpr int kLingerSeconds = 2;
}  // namespace

// The Exchange of one request on a Session. Output goes to the session only while this is its
// current exchange and the connection is up; otherwise it is dropped.
class SessionExchange final : public Exchange {
 public:
  SessionExchange(std::shared_ptr<Session> session, HttpRequest request, double start, asio::any_io_executor executor)
      : session_(std::move(session)), request_(std::move(request)), start_(start), executor_(std::move(executor)) {}

  const HttpRequest& request() const override { return request_; }

  void Respond(HttpResponse r) override {
    if (closed()) return;
    ended_ = true;
    const bool keep_alive = session_->keep_alive_ && !session_->closing_;
    session_->Enqueue(ResponseHead(r.status, r.content_type, static_cast<int64_t>(r.body.size()), keep_alive, r.headers) +
                      r.body);
    session_->EndResponse();
  }
  void StartStream(int status, std::string content_type, HeaderList headers) override {
    if (closed() || streaming_) return;
    streaming_ = true;
    session_->Enqueue(ResponseHead(status, content_type, -1, session_->keep_alive_ && !session_->closing_, headers));
  }
  void Write(std::string data) override {
    if (!closed() && streaming_) session_->Enqueue(Chunk(data));
  }
  void EndStream() override {
    if (closed()) return;
    ended_ = true;
    if (streaming_) session_->Enqueue(LastChunk());
    session_->EndResponse();
  }
  bool closed() const override {
    return ended_ || gone_ || session_->closed_ || session_->exchange_.get() != this;
  }
  void Post(std::function<void()> task) override { asio::post(executor_, std::move(task)); }
  void PostAfter(double seconds, std::function<void()> task) override {
    auto timer = std::make_shared<asio::steady_timer>(executor_, std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                     std::chrono::duration<double>(seconds)));
    asio::dispatch(executor_, [weak = std::weak_ptr<Session>(session_), timer, task = std::move(task)]() mutable {
      const std::shared_ptr<Session> session = weak.lock();
      if (!session || session->shut_down_) return;  // the server stopped: dropped
      std::erase_if(session->timers_, [](const std::weak_ptr<asio::steady_timer>& t) { return t.expired(); });
      session->timers_.push_back(timer);
      timer->async_wait([timer, task = std::move(task)](const boost::system::error_code& ec) {
        if (ec != asio::error::operation_aborted) task();
      });
    });
  }
  void SetCloseHandler(std::function<void()> handler) override { on_close_ = std::move(handler); }
  double start_seconds() const override { return start_; }

 private:
  friend class Session;

  // Counts the exchange out of the server's open exchanges, once.
  void Finish() {
    if (finished_) return;
    finished_ = true;
    session_->open_exchanges_->fetch_sub(1);
  }

  std::shared_ptr<Session> session_;
  HttpRequest request_;
  double start_;
  asio::any_io_executor executor_;
  std::function<void()> on_close_;
  bool streaming_ = false;
  bool ended_ = false;     // the response ended
  bool gone_ = false;      // the client went away first
  bool finished_ = false;  // counted out
};

Session::Session(tcp::socket socket, std::shared_ptr<asio::io_context> ioc, const HttpServerConfig& config,
                 const HttpServer::Handler& handler, const HttpServer::RejectObserver& on_rejected,
                 std::shared_ptr<std::atomic<int64_t>> open_exchanges)
    : ioc_(std::move(ioc)),
      stream_(std::move(socket)),
      config_(config),
      handler_(handler),
      on_rejected_(on_rejected),
      open_exchanges_(std::move(open_exchanges)) {}

Session::~Session() = default;

void Session::Run() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
}

void Session::Shutdown() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    self->shut_down_ = true;
    for (const std::weak_ptr<asio::steady_timer>& weak : self->timers_) {
      if (auto timer = weak.lock()) timer->cancel();
    }
    self->timers_.clear();
    self->DoClose();
  });
}

void Session::ReadHeader() {
  if (closed_ || closing_ || reading_) return;
  reading_ = true;
  exchange_.reset();
  parser_.emplace();
  parser_->body_limit(static_cast<uint64_t>(config_.max_body_bytes));
  parser_->header_limit(kHeaderLimit);
  stream_.expires_after(std::chrono::seconds(config_.idle_timeout_seconds));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void Session::OnHeader(beast::error_code ec) {
  if (ec) return OnReadError(ec);
  if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) Enqueue("HTTP/1.1 100 Continue\r\n\r\n");
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec2, size_t) { self->OnRequest(ec2); });
}

void Session::OnRequest(beast::error_code ec) {
  if (ec) return OnReadError(ec);
  reading_ = false;
  // The idle deadline covers waiting for a request only. Disarm it now, while no operation is
  // pending (a stream's timer cannot be reset under a pending write): a response may take
  // minutes in the queue and stream for longer.
  stream_.expires_never();
  http::request<http::string_body> msg = parser_->release();
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = req.target.substr(0, req.target.find('?'));
  for (const auto& field : msg) req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  req.body = std::move(msg.body());
  keep_alive_ = msg.keep_alive();
  responding_ = true;
  exchange_ = std::make_shared<SessionExchange>(shared_from_this(), std::move(req), base::MonotonicSeconds(),
                                                stream_.get_executor());
  open_exchanges_->fetch_add(1);
  std::shared_ptr<SessionExchange> exchange = exchange_;
  try {
    handler_(exchange);
  } catch (const std::exception& e) {
    FS_LOG(kError, "http: handler for {} {} threw: {}", exchange->request().method, exchange->request().path, e.what());
    if (exchange->streaming_) {
      exchange->EndStream();
    } else {
      ApiError err = FromError(base::Error(base::ErrorCode::kInternal, "internal error"));
      exchange->Respond(ErrorResponse(err));
    }
  }
  if (responding_) Watch();  // the answer is pending: notice a client that leaves meanwhile
}

void Session::OnReadError(beast::error_code ec) {
  reading_ = false;
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted || ec == beast::error::timeout) {
    return DoClose();
  }
  if (ec == http::error::body_limit) {
    return SendErrorAndClose(TooLarge("the request body exceeds the limit of " + std::to_string(config_.max_body_bytes) + " bytes"));
  }
  if (ec == http::error::header_limit) return SendErrorAndClose(TooLarge("the request headers are too large", 431));
  SendErrorAndClose(InvalidRequest("malformed HTTP request: " + ec.message()));
}

void Session::Watch() {
  if (watching_ || closed_ || buffer_.size() >= kMaxBufferedAhead) return;
  watching_ = true;
  stream_.expires_never();
  stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->OnWatch(ec, n);
  });
}

void Session::OnWatch(beast::error_code ec, size_t bytes) {
  watching_ = false;
  if (closed_) return;
  if (!ec || ec == asio::error::operation_aborted) {
    if (!ec) buffer_.commit(bytes);
    if (responding_) {
      if (!ec) Watch();
    } else if (!writing_ && out_.empty()) {
      Continue();
    }
    return;
  }
  ClientGone();  // end of stream or reset while (or right after) answering
  DoClose();
}

void Session::Enqueue(std::string bytes) {
  if (closed_ || bytes.empty()) return;
  out_bytes_ += static_cast<int64_t>(bytes.size());
  out_.push_back(std::move(bytes));
  if (out_bytes_ > config_.max_pending_write_bytes) {
    FS_LOG_THROTTLED(10, kWarning, "http: client is {} bytes behind; closing the connection", out_bytes_);
    ClientGone();
    DoClose();
    return;
  }
  if (!writing_) DoWrite();
}

void Session::DoWrite() {
  writing_ = true;
  asio::async_write(stream_, asio::buffer(out_.front()),
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
}

void Session::OnWrite(beast::error_code ec) {
  writing_ = false;
  if (closed_) return;
  if (ec) {
    ClientGone();
    DoClose();
    return;
  }
  out_bytes_ -= static_cast<int64_t>(out_.front().size());
  out_.pop_front();
  if (responding_) stream_.expires_never();  // e.g. a 100-continue write that overlapped the body read
  if (!out_.empty()) return DoWrite();
  if (!responding_) Continue();
}

void Session::EndResponse() {
  responding_ = false;
  if (exchange_) exchange_->Finish();
  if (!writing_ && out_.empty()) Continue();
}

void Session::Continue() {
  if (closed_ || reading_ || responding_) return;
  if (watching_) {  // OnWatch (aborted) comes back here
    beast::error_code ec;
    stream_.socket().cancel(ec);
    return;
  }
  if (closing_ || !keep_alive_) return GracefulClose();
  ReadHeader();
}

void Session::SendErrorAndClose(const ApiError& error) {
  if (on_rejected_) on_rejected_(error.status);
  closing_ = true;
  keep_alive_ = false;
  // The request line is usually read even when the rest was refused: answer in its path's shape.
  ErrorDialect dialect = ErrorDialect::kOpenAI;
  if (parser_) {
    const auto target = parser_->get().target();
    dialect = DialectForPath(std::string_view(target.data(), target.size()));
  }
  const HttpResponse r = ErrorResponse(error, dialect);
  Enqueue(ResponseHead(r.status, "application/json", static_cast<int64_t>(r.body.size()), false, {}) + r.body);
}

void Session::GracefulClose() {
  if (closed_) return;
  closing_ = true;
  // Send FIN, then read and drop what the client still sends (e.g. the rest of an oversized
  // body) for a moment, so it sees the response rather than a reset.
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(kLingerSeconds));
  Drain();
}

void Session::Drain() {
  buffer_.consume(buffer_.size());
  stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
    if (ec) return self->DoClose();
    self->buffer_.commit(n);
    self->Drain();
  });
}

void Session::ClientGone() {
  if (!exchange_ || exchange_->ended_ || exchange_->gone_) return;
  exchange_->gone_ = true;
  exchange_->Finish();
  responding_ = false;
  std::function<void()> handler = std::move(exchange_->on_close_);
  exchange_->on_close_ = nullptr;
  if (handler) handler();
}

void Session::DoClose() {
  if (closed_) return;
  closed_ = true;
  ClientGone();
  if (exchange_) exchange_->Finish();
  exchange_.reset();  // breaks the session <-> exchange cycle
  out_.clear();
  out_bytes_ = 0;
  stream_.close();
}

}  // namespace flashserve::net
