// The shared HTTP front (net/route_table.h): dispatch, 404 / 405 + Allow / 401, per-route
// records.
#include "net/route_table.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "net/api_error.h"

namespace flashserve::net {
namespace {

class TestExchange final : public Exchange {
 public:
  TestExchange(std::string method, std::string path, HeaderList headers = {}) {
    request_.method = std::move(method);
    request_.path = request_.target = std::move(path);
    request_.headers = std::move(headers);
  }
  const HttpRequest& request() const override { return request_; }
  void Respond(HttpResponse r) override { response = std::move(r); }
  void StartStream(int, std::string, HeaderList) override {}
  void Write(std::string) override {}
  void EndStream() override {}
  bool closed() const override { return false; }
  void Post(std::function<void()> task) override { task(); }
  void PostAfter(double, std::function<void()>) override {}
  void SetCloseHandler(std::function<void()> handler) override { on_close = std::move(handler); }
  double start_seconds() const override { return 0.0; }

  HttpResponse response;
  std::function<void()> on_close;

 private:
  HttpRequest request_;
};

std::string Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

std::string Code(const HttpResponse& r) {
  const auto j = nlohmann::json::parse(r.body)["error"]["code"];
  return j.is_null() ? "" : j.get<std::string>();
}

struct Fixture {
  std::vector<std::tuple<std::string, int>> records;
  RouteTable table{[this](const std::string& label, int status, double) { records.emplace_back(label, status); }};
  std::vector<std::string> handled;

  Fixture() {
    auto answer = [this](std::string name) {
      return [this, name](const std::shared_ptr<Exchange>& e) {
        handled.push_back(name);
        e->Respond(HttpResponse{});
      };
    };
    table.Add("POST", "/v1/chat/completions", "/v1/chat/completions", answer("chat"), /*needs_key=*/true);
    table.Add("GET", "/v1/models/*", "/v1/models/{id}", answer("model"), /*needs_key=*/true);
    table.Add("GET", "/health", "/health", answer("health"));
    table.Add("PUT", "/health", "/health", answer("put-health"));
    table.SetAuthorizer([](const HttpRequest& r) { return r.Header("authorization") == "Bearer good"; });
  }
  HttpResponse Send(std::string method, std::string path, HeaderList headers = {}) {
    auto e = std::make_shared<TestExchange>(std::move(method), std::move(path), std::move(headers));
    table.Handle(e);
    return e->response;
  }
};

TEST(RouteTableTest, DispatchesByMethodAndPathAndRecordsTheRouteLabel) {
  Fixture f;
  EXPECT_EQ(f.Send("GET", "/health").status, 200);
  EXPECT_EQ(f.Send("GET", "/v1/models/deepseek", {{"Authorization", "Bearer good"}}).status, 200);
  EXPECT_EQ(f.handled, (std::vector<std::string>{"health", "model"}));
  ASSERT_EQ(f.records.size(), 2u);
  EXPECT_EQ(f.records[1], std::make_tuple(std::string("/v1/models/{id}"), 200));
}

TEST(RouteTableTest, UnknownPathIs404AndAnotherMethodIs405WithAllow) {
  Fixture f;
  const HttpResponse missing = f.Send("GET", "/nowhere");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(Code(missing), "unknown_url");
  const HttpResponse wrong = f.Send("DELETE", "/health");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(Header(wrong, "Allow"), "GET, PUT");
  EXPECT_EQ(Code(wrong), "method_not_allowed");
  EXPECT_TRUE(f.handled.empty());
  EXPECT_EQ(f.records, (std::vector<std::tuple<std::string, int>>{{"other", 404}, {"other", 405}}));
}

TEST(RouteTableTest, KeyedRoutesAnswer401UnlessTheAuthorizerAccepts) {
  Fixture f;
  const HttpResponse refused = f.Send("POST", "/v1/chat/completions", {{"Authorization", "Bearer bad"}});
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(nlohmann::json::parse(refused.body)["error"]["type"], "authentication_error");
  EXPECT_EQ(f.Send("POST", "/v1/chat/completions", {{"Authorization", "Bearer good"}}).status, 200);
  EXPECT_EQ(f.Send("GET", "/health").status, 200);  // open routes need no key
  EXPECT_EQ(f.handled, (std::vector<std::string>{"chat", "health"}));
  EXPECT_EQ(std::get<1>(f.records[0]), 401);
  RouteTable open;  // no authorizer: every route is open
  open.Add("POST", "/x", "/x", [](const std::shared_ptr<Exchange>& e) { e->Respond(HttpResponse{}); }, true);
  auto e = std::make_shared<TestExchange>("POST", "/x");
  open.Handle(e);
  EXPECT_EQ(e->response.status, 200);
}

TEST(RouteTableTest, AClientThatLeavesFirstIsRecordedAs499) {
  Fixture f;
  std::shared_ptr<Exchange> pending;  // a route still working on its answer holds its exchange
  f.table.Add("GET", "/slow", "/slow", [&pending](const std::shared_ptr<Exchange>& e) { pending = e; });
  auto e = std::make_shared<TestExchange>("GET", "/slow");
  f.table.Handle(e);
  ASSERT_TRUE(e->on_close);
  e->on_close();
  ASSERT_EQ(f.records.size(), 1u);
  EXPECT_EQ(f.records.back(), std::make_tuple(std::string("/slow"), 499));
  pending->Respond(HttpResponse{});  // too late: recorded once
  EXPECT_EQ(f.records.size(), 1u);
}

}  // namespace
}  // namespace flashserve::net
