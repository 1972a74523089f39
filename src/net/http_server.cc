// Beast/Asio HTTP/1.1 server: acceptor, I/O threads, sessions (net/http_server.h, http_session.h).
#include "net/http_server.h"

#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "net/http_session.h"
#include "base/log.h"

namespace flashserve::net {

base::Status HttpServerConfig::Validate() const {
  using base::Error;
  using base::ErrorCode;
  if (port < 0 || port > 65535) return Error(ErrorCode::kInvalidArgument, "port must be in [0, 65535]");
  if (io_threads < 1 || io_threads > 256) return Error(ErrorCode::kInvalidArgument, "io threads must be in [1, 256]");
  if (max_body_bytes < 1024) return Error(ErrorCode::kInvalidArgument, "max body bytes must be >= 1024");
  if (idle_timeout_seconds < 1) return Error(ErrorCode::kInvalidArgument, "idle timeout must be >= 1 s");
  if (max_pending_write_bytes < 65536) return Error(ErrorCode::kInvalidArgument, "max pending write bytes must be >= 65536");
  return base::Status::Ok();
}

struct HttpServer::Impl {
  Impl(HttpServerConfig c, Handler h, RejectObserver r)
      : config(std::move(c)),
        handler(std::move(h)),
        on_rejected(std::move(r)),
        ioc(std::make_shared<asio::io_context>(config.io_threads)),
        acceptor(asio::make_strand(*ioc)),
        accept_retry(acceptor.get_executor()) {}

  void Accept() {
    acceptor.async_accept(asio::make_strand(*ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        // Out of file descriptors (EMFILE, ENFILE) or memory: the pending connection stays
        // queued and accept would fail again at once. Wait instead of spinning.
        FS_LOG_THROTTLED(10, kWarning, "http: accept failed: {}; retrying every {} ms", ec.message(),
                         kAcceptRetry.count());
        accept_retry.expires_after(kAcceptRetry);
        accept_retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec && acceptor.is_open()) Accept();
        });
        return;
      }
      // Streamed tokens are small writes: send each at once instead of waiting for an ACK (Nagle).
      beast::error_code nodelay_ec;
      socket.set_option(tcp::no_delay(true), nodelay_ec);
      try {
        auto session = std::make_shared<Session>(std::move(socket), ioc, config, handler, on_rejected, open_exchanges);
        {
          std::lock_guard<std::mutex> lock(mu);
          if (shutting_down) return;  // accepted while Stop ran: closed with the unstarted session
          sessions.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
          sessions.push_back(session);
        }
        session->Run();
      } catch (const std::exception& e) {  // out of memory: drop this connection, keep accepting
        FS_LOG_THROTTLED(10, kError, "http: cannot start a session: {}", e.what());
      }
      Accept();
    });
  }

  HttpServerConfig config;
  Handler handler;
  RejectObserver on_rejected;
  std::shared_ptr<asio::io_context> ioc;  // shared with sessions, which may outlive the server
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;  // on the acceptor's strand
  static constexpr std::chrono::milliseconds kAcceptRetry{50};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::mutex mu;  // guards sessions and shutting_down
  std::list<std::weak_ptr<Session>> sessions;
  bool shutting_down = false;  // Stop began: accepted connections are closed, not served
  std::shared_ptr<std::atomic<int64_t>> open_exchanges = std::make_shared<std::atomic<int64_t>>(0);
  int port = 0;
  bool stopped = false;
};

HttpServer::HttpServer(HttpServerConfig config, Handler handler, RejectObserver on_rejected)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler), std::move(on_rejected))) {}

HttpServer::~HttpServer() { Stop(); }

base::Status HttpServer::Start() {
  using base::Error;
  using base::ErrorCode;
  FS_RETURN_IF_ERROR(impl_->config.Validate());
  beast::error_code ec;
  tcp::resolver resolver(*impl_->ioc);
  auto results = resolver.resolve(impl_->config.host, std::to_string(impl_->config.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty())
    return Error(ErrorCode::kInvalidArgument, "cannot resolve host '" + impl_->config.host + "': " + ec.message());
  const tcp::endpoint endpoint = results.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Error(ErrorCode::kUnavailable, "cannot listen on " + endpoint.address().to_string() + ":" +
                                              std::to_string(endpoint.port()) + ": " + ec.message());
  }
  impl_->port = a.local_endpoint().port();
  impl_->work.emplace(impl_->ioc->get_executor());
  impl_->Accept();
  for (int i = 0; i < impl_->config.io_threads; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] {
      for (;;) {
        try {
          impl->ioc->run();
          return;
        } catch (const std::exception& e) {
          FS_LOG(kError, "http: I/O thread caught an exception: {}", e.what());
        }
      }
    });
  }
  return base::Status::Ok();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::StopAccepting() {
  asio::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
    impl->accept_retry.cancel();
  });
}

int64_t HttpServer::num_open_exchanges() const { return impl_->open_exchanges->load(); }

void HttpServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  StopAccepting();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shutting_down = true;
    for (auto& w : impl_->sessions)
      if (auto s = w.lock()) s->Shutdown();
    impl_->sessions.clear();
  }
  impl_->work.reset();
  impl_->ioc->stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  // Run what is still queued (the closes above, late events) on this thread, so sockets are
  // closed and jobs released now rather than when the last session lets go of the context.
  impl_->ioc->restart();
  try {
    impl_->ioc->poll();
  } catch (const std::exception& e) {
    FS_LOG(kError, "http: shutdown handler threw: {}", e.what());
  }
}

}  // namespace flashserve::net
