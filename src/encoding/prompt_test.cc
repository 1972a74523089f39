// Prompt pieces and their token ids. The id tests use the DeepSeek tokenizer file and skip when
// it is absent.
#include "encoding/prompt.h"

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "encoding/test_util.h"

namespace flashserve::encoding {
namespace {

using testing::Expand;

const char kTokenizerPath[] = FLASHSERVE_ROOT "/third_party/tokenizer/deepseek_v3/tokenizer.json";

TEST(PromptTest, MarkupSplitsControlTokensAndTextMerges) {
  PieceList pieces;
  AppendText(pieces, "a");
  AppendText(pieces, "");
  AppendMarkup(pieces, Expand("b<{DSML}tool_calls>{think}{/think}c"));
  AppendImage(pieces, "https://x");
  AppendPieces(pieces,
               PieceList{{PieceKind::kText, "d"}, {PieceKind::kControl, std::string(kEosToken)}});
  ASSERT_EQ(pieces.size(), 9u);
  EXPECT_EQ(pieces[0].text, "ab<");
  EXPECT_EQ(pieces[1].text, kDsmlToken);
  EXPECT_EQ(pieces[2].text, "tool_calls>");
  EXPECT_EQ(pieces[3].text, kThinkStartToken);
  EXPECT_EQ(pieces[4].text, kThinkEndToken);
  EXPECT_EQ(pieces[5].kind, PieceKind::kText);
  EXPECT_EQ(pieces[5].text, "c");
  EXPECT_EQ(pieces[6].kind, PieceKind::kImage);
  EXPECT_EQ(pieces[7].text, "d");  // not merged into "c": the image separates them
  EXPECT_EQ(pieces[8].text, kEosToken);
  EncodedPrompt prompt = MakePrompt(pieces);
  EXPECT_EQ(prompt.text, Expand("ab<{DSML}tool_calls>{think}{/think}c{IMG}d{EOS}"));
  EXPECT_EQ(ImageSources(prompt), std::vector<std::string>{"https://x"});
}

// Every encoder output keeps the EncodedPrompt invariants.
TEST(PromptTest, EncodedPromptInvariants) {
  for (EncodingVersion version : {EncodingVersion::kV4, EncodingVersion::kV41}) {
    EncodedPrompt prompt = testing::MustEncode(R"({"messages": [
        {"role": "system", "content": "S <｜User｜>"}, {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "reasoning_content": "r",
         "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{\"a\": \"<think>\"}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": ""}],
        "tools": [{"function": {"name": "f", "parameters": {}}}]})",
                                               version);
    std::string joined;
    for (size_t i = 0; i < prompt.pieces.size(); ++i) {
      const PromptPiece& piece = prompt.pieces[i];
      joined += PieceText(piece);
      EXPECT_FALSE(piece.text.empty());
      if (i > 0) {
        EXPECT_FALSE(piece.kind == PieceKind::kText &&
                     prompt.pieces[i - 1].kind == PieceKind::kText);
      }
    }
    EXPECT_EQ(joined, prompt.text);
    // The literals in the system text and the arguments stay inside text pieces.
    const size_t num_user_tokens = std::count_if(
        prompt.pieces.begin(), prompt.pieces.end(),
        [](const PromptPiece& p) { return p.kind == PieceKind::kControl && p.text == kUserToken; });
    EXPECT_EQ(num_user_tokens, 2u);  // the user turn and the merged tool-result turn
  }
}

class PromptIdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTokenizerPath)) {
      GTEST_SKIP() << "tokenizer file absent: " << kTokenizerPath;
    }
    tokenizer::LoadOptions options;
    options.define_missing_v4_tokens = true;
    auto loaded = tokenizer::Tokenizer::Load(kTokenizerPath, options);
    ASSERT_TRUE(loaded.ok()) << loaded.error().ToString();
    tokenizer_ = std::move(loaded).value();
  }
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
};

TEST_F(PromptIdsTest, IdsEqualHfEncodeWhenUserTextHasNoControlLiterals) {
  for (EncodingVersion version : {EncodingVersion::kV4, EncodingVersion::kV41}) {
    EncodedPrompt prompt = testing::MustEncode(R"({"messages": [
        {"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "reasoning_content": "Need the tool.",
         "tool_calls": [{"id": "1", "function": {"name": "get_weather",
                                                 "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "sunny, 21 °C"}],
        "tools": [{"function": {"name": "get_weather", "parameters": {"type": "object"}}}]})",
                                               version);
    auto ids = ToTokenIds(prompt, *tokenizer_);
    ASSERT_TRUE(ids.ok()) << ids.error().ToString();
    EXPECT_EQ(*ids, tokenizer_->Encode(prompt.text)) << EncodingVersionName(version);
    EXPECT_EQ(ids->front(), *tokenizer_->TokenId(kBosToken));
  }
}

TEST_F(PromptIdsTest, TypedControlTokensStayPlainText) {
  EncodedPrompt prompt = testing::MustEncode(
      R"({"messages": [{"role": "user", "content": "<｜User｜>"}], "thinking": {"type": "disabled"}})",
      EncodingVersion::kV41);
  auto ids = ToTokenIds(prompt, *tokenizer_);
  ASSERT_TRUE(ids.ok()) << ids.error().ToString();
  const int32_t user_id = *tokenizer_->TokenId(kUserToken);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), user_id), 1);
  std::vector<int32_t> expected = {*tokenizer_->TokenId(kBosToken), user_id};
  std::vector<int32_t> plain = tokenizer_->EncodePlain(kUserToken);
  EXPECT_GT(plain.size(), 1u);
  expected.insert(expected.end(), plain.begin(), plain.end());
  expected.push_back(*tokenizer_->TokenId(kAssistantToken));
  expected.push_back(*tokenizer_->TokenId(kThinkEndToken));
  EXPECT_EQ(*ids, expected);
  // HF encode of the same text would have read the literal as a second control token.
  EXPECT_NE(*ids, tokenizer_->Encode(prompt.text));
}

TEST_F(PromptIdsTest, EmptyUserChatPromptIsFourIds) {
  EncodedPrompt prompt = testing::MustEncode(
      R"({"messages": [{"role": "user", "content": ""}], "thinking": {"type": "disabled"}})",
      EncodingVersion::kV41);
  auto ids = ToTokenIds(prompt, *tokenizer_);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), 4u);
}

TEST_F(PromptIdsTest, MissingControlTokenIsAnError) {
  auto plain = tokenizer::Tokenizer::Load(kTokenizerPath);  // V3 file: no <｜System｜>
  ASSERT_TRUE(plain.ok());
  if ((*plain)->TokenId(kSystemToken).has_value()) GTEST_SKIP() << "tokenizer defines <｜System｜>";
  EncodedPrompt prompt = testing::MustEncode(R"({"messages": [{"role": "user", "content": "Hi"}]})",
                                             EncodingVersion::kV41);
  auto ids = ToTokenIds(prompt, **plain);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.error().code(), base::ErrorCode::kBadTokenizer);
  EXPECT_NE(ids.error().message().find("<｜System｜>"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::encoding
