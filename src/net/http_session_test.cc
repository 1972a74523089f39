// The HTTP server's sessions: at shutdown a PostAfter task still waiting when the server stops
// is dropped without running, and the exchange it held is released (before, the task kept its
// exchange, the session and the I/O context alive in a cycle that nothing broke); a client that
// stops reading a stream is cut off once its backlog passes the cap, and others are served.
#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "net/exchange.h"
#include "net/http_server.h"

namespace flashserve::net {
namespace {

TEST(HttpSession, StopDropsWaitingTasksAndReleasesTheirExchanges) {
  std::weak_ptr<Exchange> held;
  std::atomic<bool> handled{false}, ran{false};
  HttpServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  HttpServer server(config, [&](std::shared_ptr<Exchange> ex) {
    held = ex;
    ex->PostAfter(60, [ex, &ran] {
      ran = true;
      ex->Respond({200, "text/plain", "late", {}});
    });
    handled = true;
  });
  ASSERT_TRUE(server.Start().ok());
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port())});
  boost::asio::write(socket, boost::asio::buffer(std::string("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")));
  for (int i = 0; i < 500 && !handled; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(handled);
  EXPECT_FALSE(held.expired());  // the waiting task holds it
  server.Stop();
  EXPECT_TRUE(held.expired());
  EXPECT_FALSE(ran);
}

// A stream whose client never reads: the server's queue for it grows until
// max_pending_write_bytes, then the connection closes as if the client had left (its close
// handler runs, so a generation behind it is cancelled); another client is served meanwhile.
TEST(HttpSession, AClientThatStopsReadingIsCutOffAtTheBacklogCap) {
  HttpServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.max_pending_write_bytes = 1 << 20;
  std::atomic<bool> gone{false};
  std::atomic<int64_t> written{0};
  const std::string piece(64 << 10, 'x');
  std::function<void(std::shared_ptr<Exchange>)> pump = [&](std::shared_ptr<Exchange> ex) {
    if (ex->closed()) return;
    ex->Write(piece);
    written += static_cast<int64_t>(piece.size());
    ex->PostAfter(0.001, [ex, &pump] { pump(ex); });
  };
  HttpServer server(config, [&](std::shared_ptr<Exchange> ex) {
    if (ex->request().path == "/health") return ex->Respond({200, "text/plain", "ok", {}});
    ex->SetCloseHandler([&gone] { gone = true; });
    ex->StartStream(200, "text/event-stream");
    pump(ex);
  });
  ASSERT_TRUE(server.Start().ok());
  boost::asio::io_context ioc;
  const boost::asio::ip::tcp::endpoint at(boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port()));
  boost::asio::ip::tcp::socket sleeper(ioc);
  sleeper.open(boost::asio::ip::tcp::v4());
  sleeper.set_option(boost::asio::socket_base::receive_buffer_size(64 << 10));
  sleeper.connect(at);
  boost::asio::write(sleeper, boost::asio::buffer(std::string("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")));
  for (int i = 0; i < 1000 && !gone; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(gone) << written << " bytes written to a client that reads nothing";
  EXPECT_LT(written.load(), 64 << 20) << "bounded by the cap and the socket buffers";
  boost::asio::ip::tcp::socket other(ioc);
  other.connect(at);
  boost::asio::write(other, boost::asio::buffer(std::string("GET /health HTTP/1.1\r\nHost: a\r\n\r\n")));
  std::string answer(256, '\0');
  const size_t n = other.read_some(boost::asio::buffer(answer));
  EXPECT_EQ(answer.substr(0, 15), "HTTP/1.1 200 OK") << answer.substr(0, n);
  server.Stop();
}

}  // namespace
}  // namespace flashserve::net
