// The HTTP server's sessions at shutdown: a PostAfter task still waiting when the server stops
// is dropped without running, and the exchange it held is released (before, the task kept its
// exchange, the session and the I/O context alive in a cycle that nothing broke).
#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
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

}  // namespace
}  // namespace flashserve::net
