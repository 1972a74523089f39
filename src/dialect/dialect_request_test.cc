// The dialect parsers outside a worker: sealed reasoning refused without a seal, opened with
// it, estimated (visible text, else empty) for the router; Chat bodies' effort names, budgets,
// prefix completion and reasoning hand-back checks.
#include "dialect/dialect_request.h"

#include <gtest/gtest.h>

namespace flashserve::dialect {
namespace {

using Json = nlohmann::ordered_json;

ReasoningSeal TestSeal(uint8_t fill) {
  std::array<uint8_t, ReasoningSeal::kKeyBytes> key{};
  key.fill(fill);
  return ReasoningSeal(key);
}

Json ThinkingTurn(const Json& block) {
  return {{"model", "m"}, {"max_tokens", 8},
          {"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", {block}}},
                        {{"role", "user"}, {"content", "And?"}}}}};
}

TEST(DialectRequest, SealedThinkingIsOpenedRefusedOrEstimated) {
  const ReasoningSeal seal = TestSeal(3);
  const Json signed_block = {{"type", "thinking"}, {"thinking", "step one"}, {"signature", seal.Seal("step one")}};
  const Json redacted = {{"type", "redacted_thinking"}, {"data", seal.Seal("hidden")}};
  DialectRequest req;
  // With the seal: the text comes from the signature.
  ASSERT_FALSE(ParseMessagesBody(ThinkingTurn(redacted), {.vocab_size = 100, .seal = &seal}, &req));
  EXPECT_EQ(req.chat.messages[1].reasoning_content, "hidden");
  // Without one: a 400 naming the field, unless estimating.
  req = {};
  auto e = ParseMessagesBody(ThinkingTurn(signed_block), {.vocab_size = 100}, &req);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "messages[1].content[0].signature");
  req = {};
  ASSERT_FALSE(ParseMessagesBody(ThinkingTurn(signed_block), {.vocab_size = 100, .estimate_sealed = true}, &req));
  EXPECT_EQ(req.chat.messages[1].reasoning_content, "step one");
  req = {};
  ASSERT_FALSE(ParseMessagesBody(ThinkingTurn(redacted), {.vocab_size = 100, .estimate_sealed = true}, &req));
  EXPECT_EQ(req.chat.messages[1].reasoning_content.value_or("?"), "");
  // Another key: refused (a forged or foreign blob), estimated only when asked.
  const ReasoningSeal other = TestSeal(4);
  req = {};
  EXPECT_TRUE(ParseMessagesBody(ThinkingTurn(redacted), {.vocab_size = 100, .seal = &other}, &req).has_value());
  req = {};
  EXPECT_FALSE(ParseMessagesBody(ThinkingTurn(redacted), {.vocab_size = 100, .seal = &other, .estimate_sealed = true}, &req));
}

TEST(DialectRequest, ChatBodies) {
  const Json user = {{"role", "user"}, {"content", "Hi"}};
  DialectRequest req;
  ASSERT_FALSE(ParseChatBody({{"model", "m"}, {"messages", {user}}, {"reasoning_effort", "xhigh"}}, {.vocab_size = 100}, &req));
  EXPECT_EQ(std::get<std::string>(req.chat.reasoning_effort), "max");
  req = {};
  ASSERT_FALSE(ParseChatBody({{"model", "m"}, {"messages", {user}}, {"reasoning_effort", "none"}}, {.vocab_size = 100}, &req));
  EXPECT_EQ(req.chat.thinking, false);
  req = {};
  ASSERT_FALSE(ParseChatBody({{"model", "m"}, {"messages", {user}}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 5}}}},
                             {.vocab_size = 100}, &req));
  EXPECT_EQ(req.options.reasoning_budget, 5);
  const Json refusals[] = {
      {{"model", "m"}, {"messages", {user}}, {"store", true}},
      {{"model", "m"}, {"messages", {user, {{"role", "assistant"}, {"content", "x"}}}}},  // no prefix: true
      {{"model", "m"}, {"messages", {user, {{"role", "assistant"}, {"content", ""},
                                            {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                                             {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}},
                                     {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "1"}}}}},  // no reasoning
      {{"model", "m"}, {"messages", {user}}, {"logit_bias", {{"100", 1}}}},  // beyond the vocabulary
  };
  const char* params[] = {"store", "messages[1].prefix", "messages[1].reasoning_content", "logit_bias"};
  for (size_t i = 0; i < std::size(refusals); ++i) {
    req = {};
    auto e = ParseChatBody(refusals[i], {.vocab_size = 100}, &req);
    ASSERT_TRUE(e.has_value()) << refusals[i].dump();
    EXPECT_EQ(e->param, params[i]) << e->message;
  }
}

}  // namespace
}  // namespace flashserve::dialect
