// ImageFetchStage: bodies without remote pictures pass straight through; remote ones are
// fetched (from a loopback server) and the route runs, on the exchange's strand, with them
// inlined as data URLs and the rest of the body unchanged; a failed fetch is the dialect's 400
// naming the part and the route never runs; too many waiting pictures is a 503; a client that
// left starts nothing.
#include "api/image_fetch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/api_test_util.h"
#include "net/http_server.h"

namespace flashserve::api {
namespace {

using Json = nlohmann::ordered_json;

class ImageFetchStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net::HttpServerConfig config;
    config.port = 0;
    site_ = std::make_unique<net::HttpServer>(config, [](std::shared_ptr<net::Exchange> ex) {
      if (ex->request().path == "/a.png") return ex->Respond({200, "image/png", "bytes", {}});
      ex->Respond({404, "text/plain", "no", {}});
    });
    ASSERT_TRUE(site_->Start().ok());
    policy_.hosts = {"127.0.0.1"};
    policy_.allow_private = true;
  }
  void TearDown() override { site_->Stop(); }

  std::string Url(const char* path) const { return fmt::format("http://127.0.0.1:{}{}", site_->port(), path); }

  std::string ChatBody(const std::string& url) const {
    Json body = {{"model", "m"},
                 {"temperature", 0.25},
                 {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "é?"}},
                                                               {{"type", "image_url"}, {"image_url", {{"url", url}}}}}}}}}};
    return body.dump();
  }

  // Runs the exchange's posted tasks until `done` or two seconds pass.
  static void RunUntil(testing::FakeExchange& ex, const std::function<bool()>& done) {
    for (int i = 0; i < 400 && !done(); ++i) {
      ex.RunTasks();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::unique_ptr<net::HttpServer> site_;
  vision::FetchPolicy policy_;
  ApiMetrics metrics_;
};

TEST_F(ImageFetchStageTest, BodiesWithoutRemotePicturesPassStraightThrough) {
  ImageFetchStage stage(policy_, 1, 4, &metrics_);
  auto ex = std::make_shared<testing::FakeExchange>(ChatBody("data:image/png;base64,AAAA"));
  std::shared_ptr<net::Exchange> seen;
  stage.Handle(ex, net::ErrorDialect::kOpenAI, [&](const std::shared_ptr<net::Exchange>& e) { seen = e; });
  EXPECT_EQ(seen, ex);  // synchronously, the same exchange
  ImageFetchStage off(vision::FetchPolicy{}, 1, 4, &metrics_);
  auto remote = std::make_shared<testing::FakeExchange>(ChatBody(Url("/a.png")));
  seen = nullptr;
  off.Handle(remote, net::ErrorDialect::kOpenAI, [&](const std::shared_ptr<net::Exchange>& e) { seen = e; });
  EXPECT_EQ(seen, remote);  // fetching off: the route's own refusal says how to enable it
}

TEST_F(ImageFetchStageTest, RemotePicturesArriveInlined) {
  ImageFetchStage stage(policy_, 2, 4, &metrics_);
  auto ex = std::make_shared<testing::FakeExchange>(ChatBody(Url("/a.png")));
  std::string body;
  stage.Handle(ex, net::ErrorDialect::kOpenAI, [&](const std::shared_ptr<net::Exchange>& e) {
    body = e->request().body;
    e->Respond({200, "application/json", "{}", {}});
  });
  EXPECT_TRUE(body.empty());  // not before the fetch
  RunUntil(*ex, [&] { return !body.empty(); });
  const Json got = Json::parse(body);
  EXPECT_EQ(got["messages"][0]["content"][1]["image_url"]["url"], "data:image/*;base64,Ynl0ZXM=");
  Json want = Json::parse(ChatBody(Url("/a.png")));
  want["messages"][0]["content"][1]["image_url"]["url"] = "data:image/*;base64,Ynl0ZXM=";
  EXPECT_EQ(got, want);
  EXPECT_EQ(ex->status, 200);  // the route answered through the original exchange
  EXPECT_NE(metrics_.Render().find("flashserve_image_fetches_total{outcome=\"ok\"} 1"), std::string::npos);
}

TEST_F(ImageFetchStageTest, AFailedFetchIsTheDialectsError) {
  ImageFetchStage stage(policy_, 1, 4, &metrics_);
  auto ex = std::make_shared<testing::FakeExchange>(ChatBody(Url("/missing.png")), "POST", "/v1/messages");
  bool ran = false;
  stage.Handle(ex, net::ErrorDialect::kAnthropic, [&](const std::shared_ptr<net::Exchange>&) { ran = true; });
  RunUntil(*ex, [&] { return ex->ended; });
  EXPECT_FALSE(ran);
  EXPECT_EQ(ex->status, 400);
  const Json error = Json::parse(ex->body);
  EXPECT_EQ(error["type"], "error");
  EXPECT_NE(error["error"]["message"].get<std::string>().find("messages[0].content[1]: the image URL on '127.0.0.1' answered HTTP 404"),
            std::string::npos)
      << ex->body;
}

TEST_F(ImageFetchStageTest, TooManyWaitingIsA503AndALeftClientStartsNothing) {
  ImageFetchStage stage(policy_, 1, 1, &metrics_);
  Json two = Json::parse(ChatBody(Url("/a.png")));
  two["messages"][0]["content"].push_back({{"type", "image_url"}, {"image_url", Url("/a.png")}});
  auto full = std::make_shared<testing::FakeExchange>(two.dump());
  stage.Handle(full, net::ErrorDialect::kOpenAI, [](const std::shared_ptr<net::Exchange>&) { FAIL(); });
  EXPECT_EQ(full->status, 503);
  auto ex = std::make_shared<testing::FakeExchange>(ChatBody(Url("/a.png")));
  bool ran = false;
  stage.Handle(ex, net::ErrorDialect::kOpenAI, [&](const std::shared_ptr<net::Exchange>&) { ran = true; });
  ex->Disconnect();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ex->RunTasks();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace flashserve::api
