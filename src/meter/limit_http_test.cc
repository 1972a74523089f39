// Rate-limit headers and refusals as clients see them, from a worker or the router
// (meter/limit_http.h).
#include "meter/limit_http.h"

#include <gtest/gtest.h>
#include <strings.h>

#include <nlohmann/json.hpp>

namespace flashserve::meter {
namespace {

constexpr int64_t kT = 1'796'083'200;  // 2026-12-01T00:00:00Z

std::string Header(const net::HeaderList& h, const std::string& name) {
  for (const auto& [k, v] : h)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return "<absent>";
}

LimitDecision Decision(bool allowed = true) {
  LimitDecision d;
  d.allowed = allowed;
  d.reason = "requests per minute";
  d.retry_after_s = allowed ? 0 : 7;
  d.requests_limit = 60;
  d.requests_remaining = 59;
  d.requests_reset_s = 60;
  d.output_limit = 1000;
  d.output_remaining = 400;
  d.output_reset_s = 12;
  return d;
}

TEST(LimitHttpTest, OpenAIAndAnthropicHeadersShowTheLimitsThatAreSet) {
  const net::HeaderList openai = RateLimitHeaders(Decision(), net::ErrorDialect::kOpenAI, kT);
  EXPECT_EQ(Header(openai, "x-ratelimit-limit-requests"), "60");
  EXPECT_EQ(Header(openai, "x-ratelimit-remaining-requests"), "59");
  EXPECT_EQ(Header(openai, "x-ratelimit-reset-requests"), "60s");
  EXPECT_EQ(Header(openai, "x-ratelimit-limit-tokens"), "<absent>");  // no input limit set
  EXPECT_EQ(openai.size(), 3u);  // OpenAI has no output-token headers
  const net::HeaderList anthropic = RateLimitHeaders(Decision(), net::ErrorDialect::kAnthropic, kT);
  EXPECT_EQ(Header(anthropic, "anthropic-ratelimit-requests-limit"), "60");
  EXPECT_EQ(Header(anthropic, "anthropic-ratelimit-output-tokens-remaining"), "400");
  EXPECT_EQ(Header(anthropic, "anthropic-ratelimit-output-tokens-reset"), "2026-12-01T00:00:12Z");
  EXPECT_EQ(anthropic.size(), 6u);
}

TEST(LimitHttpTest, RefusalsSayWhetherWaitingHelps) {
  LimitDecision wait = Decision(false);
  net::HttpResponse r = LimitRefusal(wait, 10, net::ErrorDialect::kOpenAI, kT);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Header(r.headers, "retry-after"), "7");
  EXPECT_EQ(Header(r.headers, "x-flashserve-limit"), "tenant");
  EXPECT_EQ(Header(r.headers, "x-ratelimit-remaining-requests"), "59");
  EXPECT_NE(r.body.find("requests per minute"), std::string::npos) << r.body;

  LimitDecision budget = Decision(false);
  budget.budget = true;
  r = LimitRefusal(budget, 10, net::ErrorDialect::kOpenAI, kT);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "insufficient_quota");
  r = LimitRefusal(budget, 10, net::ErrorDialect::kAnthropic, kT);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(nlohmann::json::parse(r.body)["type"], "error");
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "rate_limit_error");

  LimitDecision never = Decision(false);
  never.never = true;
  never.input_limit = 5;
  never.retry_after_s = 0;
  r = LimitRefusal(never, 10, net::ErrorDialect::kOpenAI, kT);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "input_tokens_limit_exceeded");
  EXPECT_EQ(Header(r.headers, "x-flashserve-limit"), "<absent>");  // a router must not treat it as a wait
}

}  // namespace
}  // namespace flashserve::meter
