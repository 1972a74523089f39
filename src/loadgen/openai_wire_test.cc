// Request bodies (text and token-id prompts), streamed-chunk parsing and StreamAccumulator timing/usage bookkeeping.
#include "loadgen/openai_wire.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace flashserve::loadgen {
namespace {
using Json = nlohmann::json;

TEST(OpenAiWireTest, ChatBodyAsksForStreamedUsage) {
  SamplingParams p{"m1", 64, 0.5, std::nullopt, false};
  Json body = Json::parse(BuildRequestBody(ApiKind::kChat, p, {{"system", "sys", {}}, {"user", "hi", {}}}));
  EXPECT_EQ(body["model"], "m1");
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["temperature"], 0.5);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_FALSE(body.contains("ignore_eos"));
  EXPECT_FALSE(body.contains("seed"));
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], "hi");
  EXPECT_EQ(ApiPath(ApiKind::kChat), "/v1/chat/completions");
}

TEST(OpenAiWireTest, CompletionsBodyJoinsMessagesAndSendsExtras) {
  SamplingParams p{"m1", 8, 0.0, 42, true};
  Json body = Json::parse(BuildRequestBody(ApiKind::kCompletions, p, {{"system", "a", {}}, {"user", "b", {}}}));
  EXPECT_EQ(body["prompt"], "a\nb");
  EXPECT_FALSE(body.contains("messages"));
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["seed"], 42);
  EXPECT_EQ(ApiPath(ApiKind::kCompletions), "/v1/completions");
}

TEST(OpenAiWireTest, TokenPromptBodySendsTheIdsAsAnArray) {
  SamplingParams p{"m1", 5, 0.0, std::nullopt, true};
  const std::vector<int32_t> ids = {101, 7, 31999};
  Json body = Json::parse(BuildTokenPromptBody(p, ids));
  EXPECT_EQ(body["prompt"], Json::array({101, 7, 31999}));
  EXPECT_EQ(body["max_tokens"], 5);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_FALSE(body.contains("messages"));
}

TEST(OpenAiWireTest, ParsesDeltasOfEveryKind) {
  auto role = ParseStreamChunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  ASSERT_TRUE(role.ok());
  EXPECT_FALSE(role->has_token);
  auto content = ParseStreamChunk(R"({"choices":[{"delta":{"content":"Hi"}}],"usage":null})");
  ASSERT_TRUE(content.ok());
  EXPECT_TRUE(content->has_token);
  EXPECT_EQ(content->text, "Hi");
  EXPECT_FALSE(content->usage.has_value());
  auto reasoning = ParseStreamChunk(R"({"choices":[{"delta":{"reasoning_content":"hmm"}}]})");
  EXPECT_TRUE(reasoning->has_token);
  EXPECT_EQ(reasoning->text, "");
  EXPECT_TRUE(ParseStreamChunk(R"({"choices":[{"delta":{"reasoning":"x"}}]})")->has_token);
  EXPECT_TRUE(ParseStreamChunk(R"({"choices":[{"delta":{"tool_calls":[{"index":0}]}}]})")->has_token);
  auto text = ParseStreamChunk(R"({"choices":[{"index":0,"text":" world"}]})");
  EXPECT_TRUE(text->has_token);
  EXPECT_EQ(text->text, " world");
  EXPECT_TRUE(ParseStreamChunk("[DONE]")->done);
}

TEST(OpenAiWireTest, ParsesUsageInOpenAiAndDeepSeekShapes) {
  auto openai = ParseStreamChunk(
      R"({"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":64}}})");
  ASSERT_TRUE(openai.ok() && openai->usage);
  EXPECT_EQ(openai->usage->prompt_tokens, 100);
  EXPECT_EQ(openai->usage->completion_tokens, 7);
  EXPECT_EQ(openai->usage->cached_tokens, 64);
  auto deepseek = ParseStreamChunk(
      R"({"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":2,"prompt_cache_hit_tokens":32,"prompt_cache_miss_tokens":18}})");
  EXPECT_EQ(deepseek->usage->cached_tokens, 32);
  auto none = ParseStreamChunk(R"({"usage":{"prompt_tokens":5,"completion_tokens":1}})");
  EXPECT_EQ(none->usage->cached_tokens, 0);
}

TEST(OpenAiWireTest, ReportsStreamErrorsAndRejectsNonJson) {
  auto err = ParseStreamChunk(R"({"error":{"message":"engine overloaded","code":503}})");
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->error, "engine overloaded");
  EXPECT_FALSE(ParseStreamChunk("not json").ok());
  EXPECT_FALSE(ParseStreamChunk("[1,2]").ok());
  EXPECT_EQ(ErrorBodyMessage(R"({"error":{"message":"too many requests","type":"rate_limit"}})"), "too many requests");
  EXPECT_EQ(ErrorBodyMessage("  plain text\n"), "plain text");
  EXPECT_EQ(ErrorBodyMessage(std::string(500, 'x')).size(), 200u);
}

std::string Sse(const std::string& payload) { return "data: " + payload + "\n\n"; }

TEST(StreamAccumulatorTest, TimesTokensAtEverySplitPoint) {
  const std::string role = Sse(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})");
  const std::string tok1 = Sse(R"({"choices":[{"delta":{"content":"Hel"}}]})");
  const std::string tok2 = Sse(R"({"choices":[{"delta":{"content":"lo"}}]})");
  const std::string usage = Sse(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}})");
  const std::string stream = role + tok1 + tok2 + usage + Sse("[DONE]");
  const size_t end1 = role.size() + tok1.size(), end2 = end1 + tok2.size();
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    StreamAccumulator acc;
    acc.OnBytes(std::string_view(stream).substr(0, cut), 1.0);
    acc.OnBytes(std::string_view(stream).substr(cut), 2.5);
    double t1 = cut >= end1 ? 1.0 : 2.5, t2 = cut >= end2 ? 1.0 : 2.5;
    ASSERT_TRUE(acc.first_token_s().has_value()) << cut;
    EXPECT_EQ(*acc.first_token_s(), t1) << cut;
    ASSERT_EQ(acc.itl_s().size(), 1u) << cut;
    EXPECT_EQ(acc.itl_s()[0], t2 - t1) << cut;
    EXPECT_EQ(acc.text(), "Hello");
    EXPECT_EQ(acc.num_token_chunks(), 2);
    ASSERT_TRUE(acc.usage().has_value());
    EXPECT_EQ(acc.usage()->cached_tokens, 4);
    EXPECT_TRUE(acc.done());
    EXPECT_FALSE(acc.error().has_value());
  }
}

TEST(StreamAccumulatorTest, KeepsTheFirstErrorAndStillCountsTokens) {
  StreamAccumulator acc;
  acc.OnBytes(Sse(R"({"choices":[{"delta":{"content":"a"}}]})") + Sse("{broken") +
                  Sse(R"({"error":{"message":"later"}})"),
              0.5);
  EXPECT_EQ(acc.num_token_chunks(), 1);
  ASSERT_TRUE(acc.error().has_value());
  EXPECT_NE(acc.error()->find("not a JSON object"), std::string::npos);
  EXPECT_FALSE(acc.done());
}

}  // namespace
}  // namespace flashserve::loadgen
