// FetchImage against a loopback HTTP server: refused unless enabled, loopback refused unless
// allowed, hosts and redirect targets checked against the allowlist, size, time and redirect
// limits, other statuses; and the address classes NonPublicReason knows.
#include "vision/fetch.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "net/http_server.h"

namespace flashserve::vision {
namespace {

std::string Reason(const char* text) {
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, text, &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    return NonPublicReason(reinterpret_cast<sockaddr*>(&v4));
  }
  EXPECT_EQ(inet_pton(AF_INET6, text, &v6.sin6_addr), 1) << text;
  v6.sin6_family = AF_INET6;
  return NonPublicReason(reinterpret_cast<sockaddr*>(&v6));
}

TEST(FetchPolicy, AddressClasses) {
  const std::pair<const char*, const char*> cases[] = {
      {"127.0.0.1", "loopback"},
      {"127.255.1.2", "loopback"},
      {"10.1.2.3", "private"},
      {"172.16.0.1", "private"},
      {"172.31.255.255", "private"},
      {"172.32.0.1", ""},
      {"192.168.1.1", "private"},
      {"169.254.169.254", "link-local"},  // cloud metadata
      {"100.64.0.1", "shared (CGNAT)"},
      {"0.0.0.0", "unspecified"},
      {"224.0.0.1", "multicast"},
      {"255.255.255.255", "reserved"},
      {"8.8.8.8", ""},
      {"93.184.216.34", ""},
      {"::1", "loopback"},
      {"::", "unspecified"},
      {"::ffff:127.0.0.1", "loopback"},
      {"::ffff:10.0.0.1", "private"},
      {"::ffff:8.8.8.8", ""},
      {"64:ff9b::a9fe:a9fe", "link-local"},  // NAT64 of 169.254.169.254
      {"2002:7f00:1::", "loopback"},          // 6to4 of 127.0.0.1
      {"fd00::1", "private"},
      {"fe80::1", "link-local"},
      {"ff02::1", "multicast"},
      {"2001:db8::1", "documentation"},
      {"2606:4700::1111", ""},
  };
  for (const auto& [address, reason] : cases) EXPECT_EQ(Reason(address), reason) << address;
}

TEST(FetchPolicy, HostPatterns) {
  const std::vector<std::string> hosts = {"cdn.example.com", "*.images.test", "127.0.0.1"};
  EXPECT_TRUE(HostAllowed("cdn.example.com", hosts));
  EXPECT_TRUE(HostAllowed("CDN.Example.com", hosts));
  EXPECT_FALSE(HostAllowed("evil-cdn.example.com", hosts));
  EXPECT_FALSE(HostAllowed("example.com", hosts));
  EXPECT_TRUE(HostAllowed("a.images.test", hosts));
  EXPECT_TRUE(HostAllowed("a.b.images.test", hosts));
  EXPECT_FALSE(HostAllowed("images.test", hosts));
  EXPECT_FALSE(HostAllowed("xximages.test", hosts));
  EXPECT_TRUE(HostAllowed("127.0.0.1", hosts));
  EXPECT_FALSE(HostAllowed("localhost", hosts));
  EXPECT_TRUE(HostAllowed("anything", {"*"}));
  EXPECT_FALSE(HostAllowed("anything", {}));
}

// A loopback server with the answers the tests need.
class FetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net::HttpServerConfig config;
    config.port = 0;
    server_ = std::make_unique<net::HttpServer>(config, [this](std::shared_ptr<net::Exchange> ex) { Serve(ex); });
    ASSERT_TRUE(server_->Start().ok());
    base_ = fmt::format("http://127.0.0.1:{}", server_->port());
    policy_.hosts = {"127.0.0.1"};
    policy_.allow_private = true;
    policy_.max_bytes = 1000;
    policy_.timeout_seconds = 5;
  }
  void TearDown() override { server_->Stop(); }

  void Serve(const std::shared_ptr<net::Exchange>& ex) {
    const std::string path = ex->request().path;
    net::HttpResponse r;
    r.content_type = "image/png";
    auto redirect = [&](std::string to) {
      r.status = 302;
      r.headers.emplace_back("Location", std::move(to));
    };
    if (path == "/a.png") r.body = "picture bytes";
    else if (path == "/big.png") r.body = std::string(1001, 'x');
    else if (path == "/to-a") redirect("/a.png");
    else if (path == "/to-localhost") redirect(fmt::format("http://localhost:{}/a.png", server_->port()));
    else if (path == "/to-ftp") redirect("ftp://127.0.0.1/a.png");
    else if (path == "/loop") redirect("/loop");
    else if (path == "/slow") return ex->PostAfter(3, [ex] { ex->Respond({200, "image/png", "late", {}}); });
    else r.status = 404;
    ex->Respond(std::move(r));
  }

  std::unique_ptr<net::HttpServer> server_;
  std::string base_;
  FetchPolicy policy_;
};

std::string Message(const base::Result<std::vector<uint8_t>>& r) { return r.ok() ? "ok" : r.error().message(); }

TEST_F(FetchTest, RefusedUntilEnabled) {
  FetchPolicy off;
  EXPECT_NE(Message(FetchImage(base_ + "/a.png", off)).find("--image-fetch-hosts"), std::string::npos);
}

TEST_F(FetchTest, LoopbackNeedsThePrivateFlag) {
  policy_.allow_private = false;
  const std::string m = Message(FetchImage(base_ + "/a.png", policy_));
  EXPECT_NE(m.find("127.0.0.1 (loopback)"), std::string::npos) << m;
  EXPECT_NE(m.find("--image-fetch-allow-private"), std::string::npos) << m;
  policy_.allow_private = true;
  auto ok = FetchImage(base_ + "/a.png", policy_);
  ASSERT_TRUE(ok.ok()) << Message(ok);
  EXPECT_EQ(std::string(ok->begin(), ok->end()), "picture bytes");
}

TEST_F(FetchTest, HostsAndRedirectsFollowTheAllowlist) {
  auto followed = FetchImage(base_ + "/to-a", policy_);
  ASSERT_TRUE(followed.ok()) << Message(followed);
  EXPECT_EQ(std::string(followed->begin(), followed->end()), "picture bytes");
  EXPECT_NE(Message(FetchImage(base_ + "/to-localhost", policy_)).find("'localhost' is not among"), std::string::npos);
  EXPECT_NE(Message(FetchImage(base_ + "/to-ftp", policy_)).find("http or https"), std::string::npos);
  EXPECT_NE(Message(FetchImage(base_ + "/loop", policy_)).find("redirected more than 3"), std::string::npos);
  EXPECT_NE(Message(FetchImage(fmt::format("http://localhost:{}/a.png", server_->port()), policy_)).find("not among"),
            std::string::npos);
  EXPECT_NE(Message(FetchImage("not a url", policy_)).find("not a valid URL"), std::string::npos);
}

TEST_F(FetchTest, LimitsAndStatuses) {
  auto big = FetchImage(base_ + "/big.png", policy_);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), base::ErrorCode::kResourceExhausted);
  EXPECT_NE(Message(FetchImage(base_ + "/missing.png", policy_)).find("HTTP 404"), std::string::npos);
  policy_.timeout_seconds = 0.3;
  EXPECT_NE(Message(FetchImage(base_ + "/slow", policy_)).find("took longer than 0.3 s"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::vision
