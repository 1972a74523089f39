// The router's prompt tokens and block hashes: the worker's encoding path (chat, with effort
// names, text parts and prefix completion; Messages and Responses through the same parsers,
// sealed reasoning exact with the fleet's seal and estimated without), BOS + text
// (completions), token-id prompts, tenant-seeded hashes, and bodies it cannot read.
#include "router/prompt_hasher.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "dialect/dialect_request.h"
#include "encoding/encoder.h"
#include "encoding/request_prompt.h"
#include "protocol/chat_json.h"

namespace flashserve::router {
namespace {

const char kTokenizerPath[] = FLASHSERVE_ROOT "/third_party/tokenizer/deepseek_v3/tokenizer.json";
using Json = nlohmann::ordered_json;

class PromptHasherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTokenizerPath)) GTEST_SKIP() << "tokenizer file absent: " << kTokenizerPath;
    auto loaded = tokenizer::Tokenizer::Load(kTokenizerPath, tokenizer::LoadOptions{.define_missing_v4_tokens = true});
    ASSERT_TRUE(loaded.ok()) << loaded.error().ToString();
    tok_ = std::move(loaded).value();
  }
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(PromptHasherTest, ChatTokensAreTheEncodersAndBlocksAreSeededByTenant) {
  PromptHasher hasher(*tok_);
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "word" + std::to_string(i) + " ";
  Json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", long_text}}}}};
  auto tokens = hasher.Tokens(PromptKind::kChat, body, encoding::EncodingVersion::kV4);
  ASSERT_TRUE(tokens.ok()) << tokens.error().ToString();
  auto chat = protocol::ChatRequestFromJson(body);
  auto prompt = encoding::EncodeChat(*chat, encoding::EncodingVersion::kV4);
  auto expected = encoding::ToTokenIds(*prompt, *tok_);
  EXPECT_EQ(*tokens, *expected);
  // V4.1 workers render the same request differently (System token, reasoning effort, ...).
  auto v41 = hasher.Tokens(PromptKind::kChat, body, encoding::EncodingVersion::kV41);
  ASSERT_TRUE(v41.ok());
  EXPECT_EQ(*v41, *encoding::ToTokenIds(*encoding::EncodeChat(*chat, encoding::EncodingVersion::kV41), *tok_));
  EXPECT_NE(*v41, *tokens);

  PromptBlocks a = PromptHasher::Blocks(*tokens, "fp", "");
  PromptBlocks b = PromptHasher::Blocks(*tokens, "fp", "tenant:acme");
  EXPECT_EQ(a.num_tokens, static_cast<int64_t>(tokens->size()));
  ASSERT_EQ(a.blocks.size(), tokens->size() / 128);
  ASSERT_GE(a.blocks.size(), 2u);
  EXPECT_EQ(a.blocks, kv::BlockHashes(kv::HashSeed("fp", ""), *tokens));
  EXPECT_NE(a.blocks[0], b.blocks[0]);  // tenants never share keys
  EXPECT_NE(PromptHasher::Blocks(*tokens, "other-model", "").blocks[0], a.blocks[0]);
}

TEST_F(PromptHasherTest, CompletionPromptsAndUnreadableBodies) {
  PromptHasher hasher(*tok_);
  auto text = hasher.Tokens(PromptKind::kCompletion, Json{{"prompt", "Hello world"}}, encoding::EncodingVersion::kV4);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->front(), *tok_->TokenId("<｜begin▁of▁sentence｜>"));
  EXPECT_EQ(std::vector<int32_t>(text->begin() + 1, text->end()), tok_->Encode("Hello world"));
  auto ids = hasher.Tokens(PromptKind::kCompletion, Json{{"prompt", {5, 6, 7}}}, encoding::EncodingVersion::kV4);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_FALSE(hasher.Tokens(PromptKind::kCompletion, Json{{"model", "m"}}, encoding::EncodingVersion::kV4).ok());
  EXPECT_FALSE(hasher.Tokens(PromptKind::kCompletion, Json{{"prompt", {1, "x"}}}, encoding::EncodingVersion::kV4).ok());
  EXPECT_FALSE(hasher.Tokens(PromptKind::kChat, Json{{"messages", "hi"}}, encoding::EncodingVersion::kV4).ok());
}

// The worker's own path for a dialect body: parser, encoder, tokenizer.
std::vector<int32_t> WorkerTokens(const tokenizer::Tokenizer& tok, const Json& body, bool messages,
                                  const dialect::ReasoningSeal* seal) {
  dialect::DialectRequest req;
  const dialect::DialectContext ctx{.vocab_size = 1 << 20, .version = encoding::EncodingVersion::kV4, .seal = seal};
  auto e = messages ? dialect::ParseMessagesBody(body, ctx, &req) : dialect::ParseResponsesBody(body, ctx, &req);
  EXPECT_FALSE(e.has_value()) << e->message;
  auto prompt = encoding::EncodeRequest(req.chat, encoding::EncodingVersion::kV4);
  EXPECT_TRUE(prompt.ok()) << prompt.error().ToString();
  return *encoding::ToTokenIds(prompt->prompt, tok);
}

TEST_F(PromptHasherTest, ChatBodiesAreReadAsTheWorkerReadsThem) {
  PromptHasher hasher(*tok_);
  const auto v4 = encoding::EncodingVersion::kV4;
  // OpenAI's effort names map to DeepSeek's (V4: low -> high) before encoding.
  Json low = {{"model", "m"}, {"reasoning_effort", "low"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  Json high = low;
  high["reasoning_effort"] = "high";
  auto a = hasher.Tokens(PromptKind::kChat, low, v4);
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  EXPECT_EQ(*a, *hasher.Tokens(PromptKind::kChat, high, v4));
  // Text parts flatten to the string V4's encoder takes.
  Json parts = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}}};
  Json plain = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  ASSERT_TRUE(hasher.Tokens(PromptKind::kChat, parts, v4).ok());
  EXPECT_EQ(*hasher.Tokens(PromptKind::kChat, parts, v4), *hasher.Tokens(PromptKind::kChat, plain, v4));
  // A final assistant message with prefix: true is continued, not closed.
  Json prefix = plain;
  prefix["messages"].push_back({{"role", "assistant"}, {"content", "Once upon"}, {"prefix", true}});
  auto continued = hasher.Tokens(PromptKind::kChat, prefix, v4);
  ASSERT_TRUE(continued.ok()) << continued.error().ToString();
  auto chat = protocol::ChatRequestFromJson(prefix);
  auto expected = encoding::EncodeChatContinuation(*chat, v4);
  EXPECT_EQ(*continued, *encoding::ToTokenIds(expected->prompt, *tok_));
  // Bodies a worker refuses are not guessed at.
  Json unknown = plain;
  unknown["no_such_field"] = 1;
  EXPECT_FALSE(hasher.Tokens(PromptKind::kChat, unknown, v4).ok());
}

TEST_F(PromptHasherTest, MessagesAndResponsesAreTokenizedAsOnTheWorkers) {
  std::array<uint8_t, dialect::ReasoningSeal::kKeyBytes> key{};
  key.fill(7);
  const dialect::ReasoningSeal seal(key);
  PromptHasher with_seal(*tok_, &seal);
  PromptHasher without(*tok_);
  const auto v4 = encoding::EncodingVersion::kV4;
  const std::string reasoning = "The user wants the weather; call the tool.";
  // A Claude Code style turn: system, tools, a signed thinking block handed back with a tool call.
  Json messages = {{"model", "m"}, {"max_tokens", 64}, {"system", "You are terse."},
                   {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
                   {"tools", {{{"name", "weather"}, {"description", "Weather"}, {"input_schema", {{"type", "object"}}}}}},
                   {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}},
                                 {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", reasoning},
                                                                       {"signature", seal.Seal(reasoning)}},
                                                                      {{"type", "tool_use"}, {"id", "t1"}, {"name", "weather"},
                                                                       {"input", {{"city", "Paris"}}}}}}},
                                 {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"},
                                                                  {"content", "18C"}}}}}}}};
  auto exact = with_seal.Tokens(PromptKind::kMessages, messages, v4);
  ASSERT_TRUE(exact.ok()) << exact.error().ToString();
  EXPECT_EQ(*exact, WorkerTokens(*tok_, messages, true, &seal));
  // Without the fleet's key the visible thinking stands in for the sealed one: the same here.
  auto estimated = without.Tokens(PromptKind::kMessages, messages, v4);
  ASSERT_TRUE(estimated.ok()) << estimated.error().ToString();
  EXPECT_EQ(*estimated, *exact);

  // Codex CLI style: instructions, a function call with encrypted reasoning, its output.
  Json responses = {{"model", "m"}, {"instructions", "You are a coding agent."},
                    {"tools", {{{"type", "function"}, {"name", "shell"}, {"parameters", {{"type", "object"}}}}}},
                    {"input", {{{"type", "message"}, {"role", "user"}, {"content", "List files"}},
                               {{"type", "reasoning"}, {"summary", Json::array()}, {"encrypted_content", seal.Seal(reasoning)}},
                               {{"type", "function_call"}, {"call_id", "c1"}, {"name", "shell"}, {"arguments", "{\"cmd\":\"ls\"}"}},
                               {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "a.txt"}}}}};
  auto r = with_seal.Tokens(PromptKind::kResponses, responses, v4);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(*r, WorkerTokens(*tok_, responses, false, &seal));
  // Without the key the reasoning counts as empty: a shorter estimate, still a prompt.
  auto guess = without.Tokens(PromptKind::kResponses, responses, v4);
  ASSERT_TRUE(guess.ok()) << guess.error().ToString();
  EXPECT_LT(guess->size(), r->size());
  EXPECT_GT(guess->size(), r->size() / 2);
  // Clients that echo the reasoning text beside its blob (as the workers return it) are
  // estimated exactly.
  Json echoed = responses;
  echoed["input"][1]["content"] = {{{"type", "reasoning_text"}, {"text", reasoning}}};
  auto from_text = without.Tokens(PromptKind::kResponses, echoed, v4);
  ASSERT_TRUE(from_text.ok()) << from_text.error().ToString();
  EXPECT_EQ(*from_text, *r);
  EXPECT_EQ(WorkerTokens(*tok_, echoed, false, &seal), *r);
  // A blob sealed under another key (a router given the wrong file) is estimated the same way;
  // count-token and tokenize bodies are not read at all.
  Json foreign = responses;
  foreign["input"][1]["encrypted_content"] = dialect::ReasoningSeal(std::array<uint8_t, 32>{}).Seal(reasoning);
  auto other = with_seal.Tokens(PromptKind::kResponses, foreign, v4);
  ASSERT_TRUE(other.ok()) << other.error().ToString();
  EXPECT_EQ(*other, *guess);
  EXPECT_FALSE(with_seal.Tokens(PromptKind::kOpaque, messages, v4).ok());
}

}  // namespace
}  // namespace flashserve::router
