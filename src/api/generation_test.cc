// The chat and text completion routes against a scripted Service and an in-memory exchange:
// response shapes, reasoning/content/tool-call split, SSE framing, usage, stop strings, n,
// logprobs, cancellation on disconnect, and every input error.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/api_test_util.h"
#include "api/routes.h"

namespace flashserve::api {
namespace {

using testing::Bytes;
using testing::FakeExchange;
using testing::FakeService;

const std::string kDsml(encoding::kDsmlToken);

class RoutesTest : public ::testing::Test {
 protected:
  RoutesTest() : tok_(testing::ByteTokenizer()) {
    ctx_.service = &service_;
    ctx_.tokenizer = tok_.get();
    ctx_.metrics = &metrics_;
    ctx_.ids = &ids_;
  }

  std::shared_ptr<FakeExchange> Run(const Json& body, bool completions = false, bool pump = true) {
    auto ex = std::make_shared<FakeExchange>(body.dump(), "POST", completions ? "/v1/completions" : "/v1/chat/completions");
    if (completions) HandleCompletions(ctx_, ex);
    else HandleChatCompletions(ctx_, ex);
    if (pump) Pump(*ex);
    return ex;
  }
  void Pump(FakeExchange& ex) {
    while (service_.Deliver(1) + ex.RunTasks() > 0) {  // one engine event at a time, as in serving
    }
  }
  static Json Chat(Json extra = Json::object()) {
    Json body = {{"model", "test-model"}, {"messages", Json::array({{{"role", "user"}, {"content", "Hi"}}})}};
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
    return body;
  }
  static Json NoThinking(Json extra = Json::object()) {
    extra["thinking"] = {{"type", "disabled"}};
    return Chat(std::move(extra));
  }
  // The JSON payloads of an SSE body ("[DONE]" kept as a string).
  static std::vector<Json> Frames(const std::string& body) {
    std::vector<Json> frames;
    size_t pos = 0;
    while (pos < body.size()) {
      EXPECT_EQ(body.compare(pos, 6, "data: "), 0) << body.substr(pos);
      const size_t end = body.find("\n\n", pos);
      if (end == std::string::npos) break;
      const std::string payload = body.substr(pos + 6, end - pos - 6);
      frames.push_back(payload == "[DONE]" ? Json("[DONE]") : Json::parse(payload));
      pos = end + 2;
    }
    return frames;
  }
  static Json Body(const FakeExchange& ex) { return Json::parse(ex.body); }

  FakeService service_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  ApiMetrics metrics_;
  IdSource ids_;
  RouteContext ctx_;
};

TEST_F(RoutesTest, ChatSplitsReasoningAndContentAndReportsUsage) {
  service_.reply = Bytes("Let me think.</think>The answer is 42.");
  service_.cached_tokens = 3;
  auto ex = Run(Chat());
  ASSERT_EQ(ex->status, 200) << ex->body;
  Json r = Body(*ex);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["model"], "test-model");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const Json& m = r["choices"][0]["message"];
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["reasoning_content"], "Let me think.");
  EXPECT_EQ(m["content"], "The answer is 42.");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  ASSERT_EQ(service_.submitted.size(), 1u);
  const protocol::GenerateRequest& req = service_.submitted[0];
  EXPECT_EQ(req.prompt.front(), testing::kBos);
  EXPECT_EQ(req.max_tokens, 4096 - static_cast<int64_t>(req.prompt.size()));  // default, clipped to the context
  const Json& u = r["usage"];
  EXPECT_EQ(u["prompt_tokens"], req.prompt.size());
  EXPECT_EQ(u["completion_tokens"], service_.reply.size());
  EXPECT_EQ(u["total_tokens"], req.prompt.size() + service_.reply.size());
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(u["prompt_cache_hit_tokens"], 3);
  EXPECT_EQ(u["prompt_cache_miss_tokens"], req.prompt.size() - 3);
}

TEST_F(RoutesTest, ThinkingDisabledGivesContentOnlyAndSamplingReachesServe) {
  service_.reply = Bytes("Plain answer");
  auto ex = Run(NoThinking({{"temperature", 0.2}, {"seed", 9}, {"max_tokens", 50}, {"n", 1}}));
  Json r = Body(*ex);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Plain answer");
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());
  const protocol::GenerateRequest& req = service_.submitted[0];
  EXPECT_FLOAT_EQ(req.sampling.temperature, 0.2f);
  EXPECT_EQ(req.sampling.seed, 9u);
  EXPECT_EQ(req.max_tokens, 50);
}

TEST_F(RoutesTest, StreamingFramesEndWithUsageAndDone) {
  service_.reply = Bytes("think</think>Hello");
  auto ex = Run(Chat({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  EXPECT_EQ(ex->status, 200);
  EXPECT_EQ(ex->content_type, "text/event-stream");
  EXPECT_TRUE(ex->ended);
  std::vector<Json> frames = Frames(ex->body);
  ASSERT_GE(frames.size(), 5u);
  EXPECT_EQ(frames.back(), "[DONE]");
  EXPECT_EQ(frames[0]["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, content;
  int finishes = 0;
  for (size_t i = 0; i + 2 < frames.size(); ++i) {
    const Json& f = frames[i];
    EXPECT_EQ(f["object"], "chat.completion.chunk");
    EXPECT_EQ(f["id"], frames[0]["id"]);
    EXPECT_TRUE(f["usage"].is_null());
    const Json& c = f["choices"][0];
    reasoning += c["delta"].value("reasoning_content", "");
    content += c["delta"].value("content", "");
    if (!c["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(reasoning, "think");
  EXPECT_EQ(content, "Hello");
  EXPECT_EQ(finishes, 1);
  const Json& last = frames[frames.size() - 2];
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], service_.reply.size());
}

TEST_F(RoutesTest, StreamWithoutIncludeUsageHasNoUsage) {
  auto ex = Run(NoThinking({{"stream", true}}));
  for (const Json& f : Frames(ex->body)) {
    if (f.is_string()) continue;
    EXPECT_FALSE(f.contains("usage"));
    EXPECT_FALSE(f["choices"].empty());
  }
}

std::string ToolCallText() {
  return "\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"get_weather\">\n<" + kDsml +
         "parameter name=\"city\" string=\"true\">Paris</" + kDsml + "parameter>\n</" + kDsml + "invoke>\n</" + kDsml +
         "tool_calls>";
}

std::string DsmlLongArgument() {
  return "\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"get_weather\">\n<" + kDsml +
         "parameter name=\"city\" string=\"true\">" + std::string(100, 'P') + "</" + kDsml + "parameter>\n</" + kDsml +
         "invoke>\n</" + kDsml + "tool_calls>";
}

Json Tools() {
  return Json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
}

TEST_F(RoutesTest, ToolCallsBecomeMessageToolCalls) {
  service_.reply = Bytes("Checking." + ToolCallText());
  auto ex = Run(NoThinking({{"tools", Tools()}}));
  ASSERT_EQ(ex->status, 200) << ex->body;
  Json r = Body(*ex);
  const Json& c = r["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["content"], "Checking.");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const Json& call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_FALSE(call.contains("index"));
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
}

TEST_F(RoutesTest, StreamedToolCallDeltaCarriesIndexIdTypeNameThenArgumentFragments) {
  service_.reply = Bytes(DsmlLongArgument());
  auto ex = Run(NoThinking({{"tools", Tools()}, {"stream", true}}));
  int heads = 0, fragments = 0;
  std::string finish, arguments;
  for (const Json& f : Frames(ex->body)) {
    if (f.is_string()) continue;
    const Json& c = f["choices"][0];
    if (c["delta"].contains("tool_calls")) {
      const Json& t = c["delta"]["tool_calls"][0];
      EXPECT_EQ(t["index"], 0);
      if (t.contains("id")) {  // the first delta of a call names it, with empty arguments
        EXPECT_EQ(t["type"], "function");
        EXPECT_EQ(t["function"]["name"], "get_weather");
        EXPECT_EQ(t["function"]["arguments"], "");
        ++heads;
      } else {
        EXPECT_FALSE(t["function"].contains("name"));
        ++fragments;
      }
      arguments += t["function"]["arguments"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(heads, 1);
  EXPECT_GE(fragments, 2);
  EXPECT_EQ(Json::parse(arguments)["city"], std::string(100, 'P'));
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(RoutesTest, MalformedToolCallIsReturnedAsText) {
  const std::string broken = "\n\n<" + kDsml + "tool_calls>oops";
  service_.reply = Bytes("a" + broken);
  auto ex = Run(NoThinking({{"tools", Tools()}}));
  Json r = Body(*ex);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "a<" + kDsml + "tool_calls>oops");  // from the block's marker
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

// A call whose block breaks after it began: the stream showed its start; the complete response
// leaves it out; both return the broken markup as content with finish_reason stop.
TEST_F(RoutesTest, CallThatBreaksAfterItBeganStreamedButLeftOutOfTheResponse) {
  service_.reply = Bytes("\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"get_weather\">\n<" + kDsml +
                         "parameter name=\"city\" string=\"true\">Paris</" + kDsml + "parameter>\noops");
  Json r = Body(*Run(NoThinking({{"tools", Tools()}})));
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_NE(r["choices"][0]["message"]["content"].get<std::string>().find("oops"), std::string::npos);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  auto ex = Run(NoThinking({{"tools", Tools()}, {"stream", true}}));
  std::string arguments, content, finish;
  for (const Json& f : Frames(ex->body)) {
    if (f.is_string()) continue;
    const Json& c = f["choices"][0];
    if (c["delta"].contains("tool_calls")) arguments += c["delta"]["tool_calls"][0]["function"]["arguments"].get<std::string>();
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(arguments, R"({"city": "Paris")");
  EXPECT_EQ(content, r["choices"][0]["message"]["content"]);
  EXPECT_EQ(finish, "stop");
}

TEST_F(RoutesTest, StopStringTrimsFinishesAndCancels) {
  service_.reply = Bytes("Hello world, goodbye");
  auto ex = Run(NoThinking({{"stop", Json::array({"xyz", "world"})}}));
  Json r = Body(*ex);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello ");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(service_.cancelled, std::vector<std::string>{r["id"].get<std::string>()});
  EXPECT_LT(r["usage"]["completion_tokens"].get<int64_t>(), static_cast<int64_t>(service_.reply.size()));
}

TEST_F(RoutesTest, UsageCountsTokensUpToTheStopStringWhenStepsMakeSeveral) {
  service_.reply = Bytes("Hello world, goodbye");
  service_.tokens_per_event = 4;  // "Hell" "o wo" "rld," " goo" ...: the stop ends inside an event
  for (int n : {1, 2}) {
    auto ex = Run(NoThinking({{"stop", "world"}, {"n", n}}));
    Json r = Body(*ex);
    ASSERT_EQ(r["choices"].size(), static_cast<size_t>(n));
    EXPECT_EQ(r["choices"][0]["message"]["content"], "Hello ");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(r["usage"]["completion_tokens"], 11 * n);  // "Hello world": the tokens up to the stop's last
  }
}

TEST_F(RoutesTest, StopStringIsNotMatchedInReasoning) {
  service_.reply = Bytes("stop here</think>fine");
  auto ex = Run(Chat({{"stop", "stop"}}));
  Json r = Body(*ex);
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], "stop here");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "fine");
  EXPECT_TRUE(service_.cancelled.empty());
}

TEST_F(RoutesTest, StreamedStopStringNeverLeaksThePrefix) {
  service_.reply = Bytes("abcENDdef");
  auto ex = Run(NoThinking({{"stream", true}, {"stop", "END"}}));
  std::string content;
  for (const Json& f : Frames(ex->body))
    if (!f.is_string()) content += f["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(content, "abc");
}

TEST_F(RoutesTest, SeveralChoicesAndLengthFinish) {
  service_.reply = Bytes("xyz");
  service_.finish_length = true;
  auto ex = Run(NoThinking({{"n", 2}}));
  Json r = Body(*ex);
  ASSERT_EQ(r["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["message"]["content"], "xyz");
    EXPECT_EQ(r["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 6);
}

TEST_F(RoutesTest, LogprobsListEveryTokenWithAlternatives) {
  service_.reply = Bytes("ab");
  auto ex = Run(NoThinking({{"logprobs", true}, {"top_logprobs", 2}}));
  Json lp = Body(*ex)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 2u);
  EXPECT_EQ(lp[0]["token"], "a");
  EXPECT_FLOAT_EQ(lp[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(lp[0]["bytes"], Json::array({97}));
  EXPECT_EQ(lp[1]["top_logprobs"].size(), 2u);
  EXPECT_EQ(service_.submitted[0].sampling.top_logprobs, 2);
}

TEST_F(RoutesTest, ClientDisconnectCancelsAndStopsWriting) {
  service_.reply = Bytes("a long reply that keeps going");
  auto ex = Run(NoThinking({{"stream", true}}), false, false);
  service_.Deliver(3);
  ex->RunTasks();
  const std::string before = ex->body;
  ex->Disconnect();
  Pump(*ex);
  ASSERT_EQ(service_.cancelled.size(), 1u);
  EXPECT_EQ(ex->body, before);
}

TEST_F(RoutesTest, ClientGoneBeforeSubmitIsNotSubmitted) {
  auto ex = std::make_shared<FakeExchange>(NoThinking().dump());
  ex->Disconnect();
  HandleChatCompletions(ctx_, ex);
  EXPECT_TRUE(service_.submitted.empty());
}

TEST_F(RoutesTest, ServerSideCancellationIsAnError) {
  auto ex = Run(NoThinking(), false, false);
  service_.Cancel(service_.submitted[0].id);  // as Server::Stop does
  Pump(*ex);
  EXPECT_EQ(ex->status, 503);
  EXPECT_EQ(Body(*ex)["error"]["code"], "cancelled");
  auto stream = Run(NoThinking({{"stream", true}}), false, false);
  service_.Cancel(service_.submitted[1].id);
  Pump(*stream);
  std::vector<Json> frames = Frames(stream->body);
  ASSERT_GE(frames.size(), 2u);
  EXPECT_TRUE(frames[frames.size() - 2].contains("error"));
  EXPECT_EQ(frames.back(), "[DONE]");
}

TEST_F(RoutesTest, FullQueueIs429WithRetryAfter) {
  service_.reject = base::Error(base::ErrorCode::kResourceExhausted, "too many queued requests");
  auto ex = Run(Chat({{"stream", true}}));
  EXPECT_EQ(ex->status, 429);
  EXPECT_FALSE(ex->streaming);
  ASSERT_EQ(ex->headers.size(), 1u);
  EXPECT_EQ(ex->headers[0].first, "Retry-After");
  EXPECT_EQ(Body(*ex)["error"]["type"], "rate_limit_error");
}

TEST_F(RoutesTest, ContextLimits) {
  service_.info.max_context = 12;
  auto ex = Run(Chat({{"messages", Json::array({{{"role", "user"}, {"content", "a long message"}}})}}));
  EXPECT_EQ(ex->status, 400);
  EXPECT_EQ(Body(*ex)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(Body(*ex)["error"]["param"], "messages");
  ex = Run(Chat({{"max_tokens", 8}}));  // prompt (6 tokens) + 8 > 12
  EXPECT_EQ(Body(*ex)["error"]["code"], "context_length_exceeded");
  ex = Run(Chat({{"max_tokens", 13}}));
  EXPECT_EQ(Body(*ex)["error"]["param"], "max_tokens");
  ex = Run(Chat({{"max_tokens", 6}}));
  EXPECT_EQ(ex->status, 200) << ex->body;
  service_.reject = base::Error(base::ErrorCode::kContextOverflow, "state pool");
  ex = Run(Chat({{"max_tokens", 1}}));
  EXPECT_EQ(ex->status, 400);
  EXPECT_EQ(Body(*ex)["error"]["code"], "context_length_exceeded");
  EXPECT_TRUE(service_.submitted.size() == 1u);
}

TEST_F(RoutesTest, InputErrors) {
  struct Case {
    std::string body;
    int status;
    const char* param;
    const char* code;
  };
  const Case cases[] = {
      {"{\"model\": ", 400, nullptr, "invalid_json"},
      {"[]", 400, nullptr, "invalid_json"},
      {"{\"model\": \"test-model\", \"messages\": [{\"role\": \"user\", \"content\": \"\xC3\x28\"}]}", 400, nullptr, "invalid_utf8"},
      {R"({"model": "other", "messages": [{"role": "user", "content": "x"}]})", 404, "model", "model_not_found"},
      {R"({"model": "test-model"})", 400, "messages", nullptr},
      {R"({"model": "test-model", "messages": "hi"})", 400, "messages", nullptr},
      {R"({"model": "test-model", "messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content", nullptr},
      {R"({"model": "test-model", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", 400, "temperature", nullptr},
      {R"({"model": "test-model", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", 400, "max_tokens", nullptr},
      {R"({"model": "test-model", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"},
          {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}]})", 400, "messages[0].content[1]", nullptr},
  };
  for (const Case& c : cases) {
    auto ex = std::make_shared<FakeExchange>(c.body);
    HandleChatCompletions(ctx_, ex);
    EXPECT_EQ(ex->status, c.status) << c.body;
    Json e = Json::parse(ex->body)["error"];
    if (c.param) {
      EXPECT_EQ(e["param"], c.param) << c.body;
    }
    if (c.code) {
      EXPECT_EQ(e["code"], c.code) << c.body;
    }
    EXPECT_TRUE(e["message"].is_string());
  }
  EXPECT_TRUE(service_.submitted.empty());
}

TEST_F(RoutesTest, CompletionsOfAStringAndOfTokenIds) {
  service_.reply = Bytes("Hello world");
  auto ex = Run({{"model", "test-model"}, {"prompt", "Once"}, {"max_tokens", 20}, {"logprobs", 1}}, true);
  ASSERT_EQ(ex->status, 200) << ex->body;
  Json r = Body(*ex);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(r["choices"][0]["text"], "Hello world");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"].size(), 11u);
  EXPECT_EQ(r["choices"][0]["logprobs"]["text_offset"][6], 6);
  EXPECT_EQ(service_.submitted[0].prompt, (std::vector<int32_t>{testing::kBos, 'O', 'n', 'c', 'e'}));
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
  ex = Run({{"model", "test-model"}, {"prompt", Json::array({1, 2, 3})}, {"max_tokens", 4}}, true);
  EXPECT_EQ(service_.submitted[1].prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(Body(*ex)["choices"][0]["text"], "Hell");
  EXPECT_EQ(Body(*ex)["choices"][0]["finish_reason"], "length");
}

TEST_F(RoutesTest, CompletionsStreamAndErrors) {
  service_.reply = Bytes("ab");
  auto ex = Run({{"model", "test-model"}, {"prompt", "x"}, {"stream", true}, {"stop", "b"}}, true);
  std::vector<Json> frames = Frames(ex->body);
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames[0]["object"], "text_completion");
  EXPECT_EQ(frames[0]["choices"][0]["text"], "a");
  EXPECT_EQ(frames[frames.size() - 2]["choices"][0]["finish_reason"], "stop");
  for (const Json& bad : {Json{{"model", "test-model"}},
                          Json{{"model", "test-model"}, {"prompt", Json::array({"a", "b"})}},
                          Json{{"model", "test-model"}, {"prompt", Json::array({-1})}},
                          Json{{"model", "test-model"}, {"prompt", "x"}, {"echo", true}},
                          Json{{"model", "test-model"}, {"prompt", "x"}, {"suffix", "y"}}}) {
    auto e = Run(bad, true);
    EXPECT_EQ(e->status, 400) << bad.dump();
  }
}


TEST_F(RoutesTest, ChatAcceptsDeepSeekEffortNamesAndTextParts) {
  auto plain = Run(Chat());
  const std::vector<int32_t> base = service_.submitted.back().prompt;
  ASSERT_EQ(Run(Chat({{"reasoning_effort", "medium"}}))->status, 200);
  EXPECT_EQ(service_.submitted.back().prompt, base);  // V4: medium -> high, the default
  EXPECT_EQ(Run(Chat({{"reasoning_effort", "bogus"}}))->status, 400);
  Json parts = Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "a"}},
                                                                        {{"type", "text"}, {"text", "b"}}})}}});
  ASSERT_EQ(Run(Chat({{"messages", parts}}))->status, 200);
  const auto& prompt = service_.submitted.back().prompt;
  const std::vector<int32_t> joined = Bytes("a\n\nb");
  EXPECT_NE(std::search(prompt.begin(), prompt.end(), joined.begin(), joined.end()), prompt.end());
}

TEST_F(RoutesTest, ChatFieldsItCannotHonourAreNamed) {
  const std::vector<std::pair<Json, std::string>> cases = {
      // This worker has no grammar engine: what needs one names the tools.
      {{{"tool_choice", "required"}, {"tools", Tools()}}, "tools"},
      {{{"parallel_tool_calls", false}, {"tools", Tools()}}, "tools"},
      {{{"parallel_tool_calls", "no"}}, "parallel_tool_calls"},
      {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"functions", Json::array()}}, "functions"},
      {{{"store", true}}, "store"},
      {{{"thinking", {{"type", "enabled"}, {"budget", 3}}}}, "thinking.budget"},
      {{{"thinking", {{"budget_tokens", 3}}}}, "thinking.budget_tokens"},
  };
  for (const auto& [extra, field] : cases) {
    auto ex = Run(Chat(extra));
    EXPECT_EQ(ex->status, 400) << extra.dump();
    EXPECT_EQ(Body(*ex)["error"]["param"], field) << ex->body;
  }
  EXPECT_EQ(Run(Chat({{"user", "u1"}, {"store", false}, {"metadata", {{"a", "b"}}}}))->status, 200);
}

TEST_F(RoutesTest, ReasoningTokensBudgetAndContentOnlyLogprobs) {
  service_.reply = Bytes("abc");
  service_.reply.push_back(testing::kThinkEnd);
  for (int32_t id : Bytes("xy")) service_.reply.push_back(id);
  auto ex = Run(Chat({{"logprobs", true}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}}}));
  Json r = Body(*ex);
  EXPECT_EQ(r["usage"]["completion_tokens_details"]["reasoning_tokens"], 4);
  ASSERT_EQ(r["choices"][0]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["logprobs"]["content"][0]["token"], "x");
  EXPECT_EQ(service_.submitted.back().reasoning_budget, 100);
  EXPECT_EQ(service_.submitted.back().think_end_token, testing::kThinkEnd);
}

TEST_F(RoutesTest, ToolCallTurnWithoutItsReasoningIsDeepSeeks400) {
  Json messages = Json::array({{{"role", "user"}, {"content", "w?"}},
                               {{"role", "assistant"}, {"content", ""},
                                {"tool_calls", Json::array({{{"id", "c1"}, {"type", "function"},
                                                             {"function", {{"name", "get_weather"}, {"arguments", "{}"}}}}})}},
                               {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sun"}}});
  auto ex = Run(Chat({{"messages", messages}, {"tools", Tools()}}));
  EXPECT_EQ(ex->status, 400);
  EXPECT_EQ(Body(*ex)["error"]["param"], "messages[1].reasoning_content");
  messages[1]["reasoning_content"] = "check";
  EXPECT_EQ(Run(Chat({{"messages", messages}, {"tools", Tools()}}))->status, 200);
  EXPECT_EQ(Run(NoThinking({{"messages", messages}, {"tools", Tools()}}))->status, 200);
}


// DeepSeek's chat prefix completion: the prompt ends with the assistant prefix instead of EOS.
TEST_F(RoutesTest, PrefixTrueContinuesTheLastAssistantMessage) {
  service_.reply = Bytes(" world");
  Json messages = Json::array({{{"role", "user"}, {"content", "Say hello world"}},
                               {{"role", "assistant"}, {"content", "Hello"}, {"prefix", true}}});
  auto ex = Run(NoThinking({{"messages", messages}}));
  ASSERT_EQ(ex->status, 200) << ex->body;
  const auto& prompt = service_.submitted.back().prompt;
  const std::vector<int32_t> tail = {264, testing::kThinkEnd, 'H', 'e', 'l', 'l', 'o'};  // <｜Assistant｜></think>Hello
  ASSERT_GE(prompt.size(), tail.size());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), prompt.end() - static_cast<std::ptrdiff_t>(tail.size())));
  EXPECT_EQ(Body(*ex)["choices"][0]["message"]["content"], " world");  // the continuation only
  // Thinking mode, reasoning only: the continuation is still reasoning.
  messages[1] = {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "Let me"}, {"prefix", true}};
  service_.reply = Bytes(" see");
  service_.reply.push_back(testing::kThinkEnd);
  for (int32_t id : Bytes("Hi")) service_.reply.push_back(id);
  Json r = Body(*Run(Chat({{"messages", messages}})));
  EXPECT_EQ(r["choices"][0]["message"]["reasoning_content"], " see");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Hi");
  // A final assistant message without prefix, or a prefix elsewhere, is refused by name.
  messages[1].erase("prefix");
  EXPECT_EQ(Body(*Run(Chat({{"messages", messages}})))["error"]["param"], "messages[1].prefix");
  messages[0]["prefix"] = true;
  EXPECT_EQ(Body(*Run(Chat({{"messages", messages}})))["error"]["param"], "messages[0].prefix");
}

TEST_F(RoutesTest, TokenizeAndDetokenizeAsVllmServesThem) {
  auto tokenize = [this](const Json& body) {
    auto ex = std::make_shared<FakeExchange>(body.dump(), "POST", "/tokenize");
    HandleTokenize(ctx_, ex);
    return Body(*ex);
  };
  Json t = tokenize({{"prompt", "abc"}});
  EXPECT_EQ(t["tokens"], Json::array({testing::kBos, 'a', 'b', 'c'}));
  EXPECT_EQ(t["count"], 4);
  EXPECT_EQ(t["max_model_len"], 4096);
  EXPECT_EQ(tokenize({{"prompt", "abc"}, {"add_special_tokens", false}})["count"], 3);
  Run(Chat());
  EXPECT_EQ(tokenize({{"model", "test-model"}, {"messages", Chat()["messages"]}})["tokens"], Json(service_.submitted.back().prompt));
  auto ex = std::make_shared<FakeExchange>(Json{{"tokens", {'h', 'i'}}}.dump(), "POST", "/detokenize");
  HandleDetokenize(ctx_, ex);
  EXPECT_EQ(Body(*ex)["prompt"], "hi");
  ex = std::make_shared<FakeExchange>(Json{{"tokens", {-1}}}.dump(), "POST", "/detokenize");
  HandleDetokenize(ctx_, ex);
  EXPECT_EQ(ex->status, 400);
  // `model`: this one or absent (null) passes; not a string is 400, another model 404 (a
  // non-string once left /tokenize's exchange open).
  for (const bool tokenize_route : {true, false}) {
    for (const Json& model : {Json("test-model"), Json(nullptr), Json(-1), Json("other-model")}) {
      Json body = tokenize_route ? Json{{"model", model}, {"prompt", "hi"}} : Json{{"model", model}, {"tokens", {'h'}}};
      ex = std::make_shared<FakeExchange>(body.dump(), "POST", tokenize_route ? "/tokenize" : "/detokenize");
      tokenize_route ? HandleTokenize(ctx_, ex) : HandleDetokenize(ctx_, ex);
      ASSERT_TRUE(ex->ended) << body.dump();
      const int expected = model.is_number() ? 400 : model == "other-model" ? 404 : 200;
      EXPECT_EQ(ex->status, expected) << body.dump();
      if (expected == 400) {
        EXPECT_EQ(Body(*ex)["error"]["param"], "model");
      }
    }
  }
}

TEST_F(RoutesTest, SuffixNeedsAStringPromptAndFimTokens) {
  auto ex = Run({{"model", "test-model"}, {"prompt", "def f("}, {"suffix", "\n  return x"}}, true);
  EXPECT_EQ(ex->status, 400);
  EXPECT_EQ(Body(*ex)["error"]["param"], "suffix");  // the byte tokenizer has no FIM tokens
  ex = Run({{"model", "test-model"}, {"prompt", Json::array({1, 2})}, {"suffix", "x"}}, true);
  EXPECT_EQ(Body(*ex)["error"]["param"], "prompt");
  EXPECT_EQ(Run({{"model", "test-model"}, {"prompt", "x"}, {"suffix", ""}}, true)->status, 200);
}


TEST_F(RoutesTest, ChoiceCountRefusedByTheLoopNamesN) {
  service_.reject = base::Error(base::ErrorCode::kInvalidArgument, "n must be between 1 and 4");
  auto ex = Run(Chat({{"n", 8}}));
  EXPECT_EQ(ex->status, 400);
  EXPECT_EQ(Body(*ex)["error"]["param"], "n");
}

}  // namespace
}  // namespace flashserve::api
