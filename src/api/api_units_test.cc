// Pure pieces of the api room: generation-field parsing, stop strings,
// HTTP/SSE framing, usage JSON and the Prometheus text.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "net/api_error.h"
#include "net/http_wire.h"
#include "api/generation_job.h"
#include "api/metrics.h"
#include "dialect/request_options.h"
#include "api/response_json.h"
#include "api/stop_matcher.h"

namespace flashserve::api {
namespace {

using Json = nlohmann::ordered_json;

std::optional<net::ApiError> Parse(const std::string& text, dialect::GenerationOptions* out, dialect::Dialect d = dialect::Dialect::kChat) {
  Json body;
  if (auto e = dialect::ParseJsonBody(text, &body)) return e;
  return dialect::ParseGenerationOptions(body, d, 1000, out);
}

TEST(RequestOptionsTest, ReadsEveryField) {
  dialect::GenerationOptions o;
  auto e = Parse(R"({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "n": 3,
      "max_tokens": 10, "max_completion_tokens": 20, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1,
      "presence_penalty": 1.5, "frequency_penalty": -1, "repetition_penalty": 1.2, "seed": -1,
      "logprobs": true, "top_logprobs": 3, "stop": ["a", "bc"], "logit_bias": {"7": 5, "9": -100},
      "stop_token_ids": [4], "ignore_eos": true, "user": "u"})", &o);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(o.model, "m");
  EXPECT_TRUE(o.stream);
  EXPECT_TRUE(o.include_usage);
  EXPECT_EQ(o.n, 3);
  EXPECT_EQ(o.max_tokens, 20);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(o.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(o.sampling.top_p, 0.9f);
  EXPECT_EQ(o.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(o.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(o.sampling.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(o.sampling.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(o.sampling.repetition_penalty, 1.2f);
  EXPECT_TRUE(o.sampling.has_seed);
  EXPECT_EQ(o.sampling.seed, ~uint64_t{0});
  EXPECT_TRUE(o.sampling.logprobs);
  EXPECT_EQ(o.sampling.top_logprobs, 3);
  EXPECT_EQ(o.stop, (std::vector<std::string>{"a", "bc"}));
  ASSERT_EQ(o.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(o.sampling.logit_bias[1], (std::pair<int32_t, float>{9, -100.0f}));
  EXPECT_EQ(o.stop_token_ids, std::vector<int32_t>{4});
  EXPECT_TRUE(o.ignore_eos);
  EXPECT_EQ(o.user, "u");
}

TEST(RequestOptionsTest, DefaultsWhenAbsentOrNull) {
  dialect::GenerationOptions o;
  auto e = Parse(R"({"model": "m", "temperature": null, "stop": "x", "max_tokens": 5.0})", &o);
  ASSERT_FALSE(e);
  EXPECT_FALSE(o.stream);
  EXPECT_EQ(o.n, 1);
  EXPECT_EQ(o.max_tokens, 5);
  EXPECT_FLOAT_EQ(o.sampling.temperature, 1.0f);
  EXPECT_FALSE(o.sampling.has_seed);
  EXPECT_EQ(o.stop, std::vector<std::string>{"x"});
}

TEST(RequestOptionsTest, BadFieldsNameTheParameter) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"messages": []})", "model"},
      {R"({"model": 3})", "model"},
      {R"({"model": "m", "temperature": "hot"})", "temperature"},
      {R"({"model": "m", "temperature": 3})", "temperature"},
      {R"({"model": "m", "top_p": 0})", "top_p"},
      {R"({"model": "m", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "max_tokens": -5})", "max_tokens"},
      {R"({"model": "m", "max_completion_tokens": 1.5})", "max_completion_tokens"},
      {R"({"model": "m", "n": 0})", "n"},
      {R"({"model": "m", "stream": "yes"})", "stream"},
      {R"({"model": "m", "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {R"({"model": "m", "stop": 5})", "stop"},
      {R"({"model": "m", "stop": [""]})", "stop"},
      {R"({"model": "m", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})", "stop"},
      {R"({"model": "m", "logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"model": "m", "logit_bias": {"5": 101}})", "logit_bias"},
      {R"({"model": "m", "logit_bias": {"5000": 1}})", "logit_bias"},
      {R"({"model": "m", "top_logprobs": 2})", "top_logprobs"},
      {R"({"model": "m", "logprobs": true, "top_logprobs": 21})", "top_logprobs"},
      {R"({"model": "m", "presence_penalty": -2.5})", "presence_penalty"},
      {R"({"model": "m", "seed": "7"})", "seed"},
      {R"({"model": "m", "user": 1})", "user"},
      {R"({"model": "m", "stop_token_ids": [99999]})", "stop_token_ids"},
  };
  for (const auto& [text, param] : cases) {
    dialect::GenerationOptions o;
    auto e = Parse(text, &o);
    ASSERT_TRUE(e) << text;
    EXPECT_EQ(e->status, 400) << text;
    EXPECT_EQ(e->param, param) << text;
  }
}

TEST(RequestOptionsTest, CompletionLogprobsIsACount) {
  dialect::GenerationOptions o;
  ASSERT_FALSE(Parse(R"({"model": "m", "logprobs": 2})", &o, dialect::Dialect::kCompletion));
  EXPECT_TRUE(o.sampling.logprobs);
  EXPECT_EQ(o.sampling.top_logprobs, 2);
  dialect::GenerationOptions bad;
  EXPECT_TRUE(Parse(R"({"model": "m", "logprobs": 6})", &bad, dialect::Dialect::kCompletion));
  EXPECT_TRUE(Parse(R"({"model": "m", "logprobs": 2})", &bad, dialect::Dialect::kChat));  // chat: a boolean
}

TEST(RequestOptionsTest, MalformedJsonAndNonObjects) {
  Json body;
  auto e = dialect::ParseJsonBody(R"({"model": )", &body);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "invalid_json");
  EXPECT_NE(e->message.find("not valid JSON"), std::string::npos);
  e = dialect::ParseJsonBody("[1, 2]", &body);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("array"), std::string::npos);
}

TEST(StopMatcherTest, HoldsBackPrefixesAndTrimsAtTheFirstStop) {
  StopMatcher m({"END", "xy"});
  StopMatcher::Output o = m.Feed("abcE");
  EXPECT_EQ(o.text, "abc");  // "E" may start "END"
  EXPECT_FALSE(o.stopped);
  o = m.Feed("Nx");
  EXPECT_EQ(o.text, "EN");  // "EN" can no longer become "END"; "x" may start "xy"
  EXPECT_FALSE(o.stopped);
  o = m.Feed("y!");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "");
  StopMatcher m2({"END"});
  EXPECT_EQ(m2.Feed("aEN").text, "a");
  StopMatcher::Output hit = m2.Feed("Dtail");
  EXPECT_TRUE(hit.stopped);
  EXPECT_EQ(hit.text, "");
  EXPECT_TRUE(m2.stopped());
  EXPECT_EQ(m2.Feed("more").text, "");
  EXPECT_EQ(m2.Finish(), "");
}

TEST(StopMatcherTest, EmitsDeadPrefixesAndReleasesTheRestAtTheEnd) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Feed("xE").text, "x");
  EXPECT_EQ(m.Feed("Nq").text, "ENq");  // "ENq" can no longer become "END"
  EXPECT_EQ(m.Feed("EN").text, "");
  EXPECT_EQ(m.Finish(), "EN");
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWinsAndUtf8StaysWhole) {
  StopMatcher m({"wor", "lo w"});
  StopMatcher::Output o = m.Feed("hello world");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.text, "hel");
  StopMatcher u({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(u.Feed("caf\xC3\xA9").text, "caf");
  EXPECT_EQ(u.Feed("!").text, "\xC3\xA9!");
  StopMatcher none({});
  EXPECT_EQ(none.Feed("abc").text, "abc");
}

TEST(HttpWireTest, HeadsChunksAndSseFrames) {
  EXPECT_EQ(net::ResponseHead(200, "application/json", 2, true, {}),
            "HTTP/1.1 200 OK\r\nServer: flashserve\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            "Connection: keep-alive\r\n\r\n");
  const std::string chunked = net::ResponseHead(429, "text/event-stream", -1, false, {{"Retry-After", "1"}});
  EXPECT_NE(chunked.find("HTTP/1.1 429 Too Many Requests\r\n"), std::string::npos);
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(chunked.find("Connection: close\r\nRetry-After: 1\r\n\r\n"), std::string::npos);
  EXPECT_EQ(chunked.find("Content-Length"), std::string::npos);
  EXPECT_EQ(net::Chunk(std::string(26, 'a')), "1a\r\n" + std::string(26, 'a') + "\r\n");
  EXPECT_EQ(net::Chunk(""), "");
  EXPECT_EQ(net::LastChunk(), "0\r\n\r\n");
  EXPECT_EQ(net::SseData(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(net::SseDone(), "data: [DONE]\n\n");
  EXPECT_STREQ(net::StatusReason(413), "Payload Too Large");
}

TEST(ResponseJsonTest, UsageHitsAndMissesAddUpToThePrompt) {
  protocol::Usage u;
  u.prompt_tokens = 300;
  u.completion_tokens = 7;
  u.cached_tokens = 256;
  Json j = UsageJson(u);
  EXPECT_EQ(j["total_tokens"], 307);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 256);
  EXPECT_EQ(j["prompt_cache_hit_tokens"], 256);
  EXPECT_EQ(j["prompt_cache_miss_tokens"], 44);
  EXPECT_EQ(j["prompt_cache_hit_tokens"].get<int64_t>() + j["prompt_cache_miss_tokens"].get<int64_t>(),
            j["prompt_tokens"].get<int64_t>());
}

TEST(ResponseJsonTest, DumpReplacesInvalidUtf8AndIdsAreUnique) {
  EXPECT_EQ(Dump(Json("a\xFF")), "\"a\xEF\xBF\xBD\"");
  IdSource ids;
  const std::string a = ids.Next("chatcmpl-"), b = ids.Next("chatcmpl-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(a.size(), std::string("chatcmpl-").size() + 24);
}

TEST(MetricsTest, ApiMetricsExportServiceStats) {
  ApiMetrics m;
  serve::ServiceStats s;
  s.running = 3;
  s.generated_tokens_total = 99;
  m.SetServiceStats(s);
  m.RecordRequest("/v1/chat/completions", 429, 0.01);
  m.RecordTimeToFirstToken(0.2);
  m.RecordInterTokenLatency(0.02);
  const std::string text = m.Render();
  EXPECT_NE(text.find("flashserve_running_sequences 3\n"), std::string::npos);
  EXPECT_NE(text.find("flashserve_generated_tokens_total 99\n"), std::string::npos);
  EXPECT_NE(text.find("flashserve_http_requests_total{route=\"/v1/chat/completions\",status=\"429\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("flashserve_time_to_first_token_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(text.find("flashserve_inter_token_latency_seconds_count 1\n"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::api

namespace flashserve::api {
namespace {

// A full queue's Retry-After: the time half the waiting requests take at the measured finish rate.
TEST(QueueRetryAfterTest, IsTheQueuesDrainTimeWithinOneToSixtySeconds) {
  serve::ServiceStats s;
  s.waiting = 200;
  EXPECT_EQ(QueueRetryAfterSeconds(s), 1) << "no rate measured yet";
  s.finished_per_second = 20;
  EXPECT_EQ(QueueRetryAfterSeconds(s), 5);  // half of 200 / 20
  s.finished_per_second = 30;
  EXPECT_EQ(QueueRetryAfterSeconds(s), 4);  // 3.33, rounded up
  s.finished_per_second = 1;
  EXPECT_EQ(QueueRetryAfterSeconds(s), 60);
  s.waiting = 0;
  EXPECT_EQ(QueueRetryAfterSeconds(s), 1);
}

}  // namespace
}  // namespace flashserve::api
