// The router's prompt tokens and block hashes: the worker's encoding path (chat), BOS + text
// (completions), token-id prompts, tenant-seeded hashes, and bodies it cannot read.
#include "router/prompt_hasher.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "encoding/encoder.h"
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

}  // namespace
}  // namespace flashserve::router
