// Exactness against Hugging Face `tokenizers` on the DeepSeek tokenizer.json: the expected ids in
// testdata/deepseek_v3_golden.json come from tools/gen_tokenizer_golden.js (npm `tokenizers`).
// Skips when third_party/tokenizer/deepseek_v3/tokenizer.json is not installed.
#include <openssl/sha.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace flashserve::tokenizer {
namespace {

using Json = nlohmann::json;

const char* const kTokenizerPath = FLASHSERVE_ROOT "/third_party/tokenizer/deepseek_v3/tokenizer.json";
const char* const kGoldenPath = FLASHSERVE_ROOT "/src/tokenizer/testdata/deepseek_v3_golden.json";

std::string ReadAll(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  std::string hex;
  for (unsigned char b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

class DeepSeekGoldenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kTokenizerPath)) {
      skip_reason_ = std::string("DeepSeek tokenizer not installed at ") + kTokenizerPath +
                     " (run scripts/setup.sh)";
      return;
    }
    const std::string file = ReadAll(kTokenizerPath);
    golden_ = Json::parse(ReadAll(kGoldenPath));
    if (Sha256Hex(file) != golden_["tokenizer_sha256"].get<std::string>()) {
      skip_reason_ = "installed tokenizer.json differs from the one the golden file was generated "
                     "from; re-run tools/gen_tokenizer_golden.js";
      return;
    }
    auto loaded = Tokenizer::LoadFromJson(file);
    ASSERT_TRUE(loaded.ok()) << loaded.error().ToString();
    tokenizer_ = std::move(loaded).value().release();
    auto demo = Tokenizer::LoadFromJson(file, LoadOptions{.define_missing_v4_tokens = true});
    ASSERT_TRUE(demo.ok()) << demo.error().ToString();
    demo_ = std::move(demo).value().release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete demo_;
    tokenizer_ = demo_ = nullptr;
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_NE(tokenizer_, nullptr);
  }
  static std::vector<int32_t> Ids(const Json& j) { return j.get<std::vector<int32_t>>(); }

  static inline Json golden_;
  static inline std::string skip_reason_;
  static inline Tokenizer* tokenizer_ = nullptr;
  static inline Tokenizer* demo_ = nullptr;
};

TEST_F(DeepSeekGoldenTest, EncodeMatchesHuggingFace) {
  size_t num_cases = 0;
  for (const Json& c : golden_["cases"]) {
    EXPECT_EQ(tokenizer_->Encode(c["text"].get<std::string>()), Ids(c["ids"])) << c["name"];
    ++num_cases;
  }
  EXPECT_GT(num_cases, 400u);
}

TEST_F(DeepSeekGoldenTest, EncodePlainMatchesHuggingFaceWithoutAddedTokens) {
  for (const Json& c : golden_["cases"]) {
    const Json& expected = c.contains("plain_ids") ? c["plain_ids"] : c["ids"];
    EXPECT_EQ(tokenizer_->EncodePlain(c["text"].get<std::string>()), Ids(expected)) << c["name"];
  }
}

TEST_F(DeepSeekGoldenTest, DecodeRoundTripsEveryCase) {
  for (const Json& c : golden_["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text)), text) << c["name"];
    EXPECT_EQ(tokenizer_->Decode(tokenizer_->EncodePlain(text)), text) << c["name"];
  }
}

TEST_F(DeepSeekGoldenTest, DecodeMatchesHuggingFace) {
  for (const Json& c : golden_["decode_cases"]) {
    EXPECT_EQ(tokenizer_->Decode(Ids(c["ids"])), c["text"].get<std::string>()) << c["ids"].dump();
  }
}

// Feeding ids one at a time gives valid UTF-8 pieces whose concatenation is the full decode.
TEST_F(DeepSeekGoldenTest, IncrementalDetokenizerMatchesDecode) {
  std::vector<std::vector<int32_t>> sequences;
  for (const Json& c : golden_["cases"]) sequences.push_back(Ids(c["ids"]));
  for (const Json& c : golden_["decode_cases"]) sequences.push_back(Ids(c["ids"]));
  for (const auto& ids : sequences) {
    IncrementalDetokenizer detok(*tokenizer_);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = detok.Push(id);
      EXPECT_TRUE(ValidateUtf8(piece).ok());
      EXPECT_LE(detok.num_pending_bytes(), 3u);
      streamed += piece;
    }
    streamed += detok.Flush();
    EXPECT_EQ(streamed, tokenizer_->Decode(ids));
  }
}

TEST_F(DeepSeekGoldenTest, LookupsMatchHuggingFace) {
  EXPECT_EQ(tokenizer_->vocab_size(), golden_["vocab_size"].get<int32_t>());
  for (const Json& t : golden_["token_ids"]) {
    const auto id = tokenizer_->TokenId(t["text"].get<std::string>());
    if (t["id"].is_null()) {
      EXPECT_FALSE(id.has_value()) << t["text"];
    } else {
      EXPECT_EQ(id, t["id"].get<int32_t>()) << t["text"];
    }
  }
  for (const Json& t : golden_["token_texts"]) {
    const auto text = tokenizer_->TokenText(t["id"].get<int32_t>());
    if (t["text"].is_null()) {
      EXPECT_FALSE(text.has_value()) << t["id"];
    } else {
      EXPECT_EQ(text, t["text"].get<std::string>()) << t["id"];
    }
  }
  EXPECT_TRUE(tokenizer_->IsSpecial(0));
  EXPECT_FALSE(tokenizer_->IsSpecial(128803));  // <｜User｜> is a non-special added token
  EXPECT_FALSE(tokenizer_->IsSpecial(19923));
}

// The demo option maps the V4 control tokens missing from this V3 file onto placeholders, in
// order, and leaves the tokens the file already has (<｜User｜>, <｜Assistant｜>) alone.
TEST_F(DeepSeekGoldenTest, DemoControlTokensUsePlaceholdersInOrder) {
  int placeholder = 0;
  for (std::string_view name : kV4ControlTokens) {
    const auto id = demo_->TokenId(name);
    ASSERT_TRUE(id.has_value()) << name;
    if (const auto original = tokenizer_->TokenId(name)) {
      EXPECT_EQ(*id, *original) << name;
      continue;
    }
    const auto expected = tokenizer_->TokenId(fmt::format("<｜place▁holder▁no▁{}｜>", placeholder++));
    EXPECT_EQ(id, expected) << name;
    EXPECT_EQ(demo_->TokenText(*id), std::string(name));
    EXPECT_EQ(demo_->Encode(name), std::vector<int32_t>{*id}) << name;
    EXPECT_EQ(demo_->EncodePlain(name), tokenizer_->EncodePlain(name)) << name;
    EXPECT_EQ(demo_->Decode(std::vector<int32_t>{*id}), name);
  }
  EXPECT_EQ(placeholder, 12);
  // Mixed text: control tokens split out, the rest is plain BPE.
  const auto think = *demo_->TokenId("<think>"), end_think = *demo_->TokenId("</think>");
  std::vector<int32_t> expected{think};
  for (int32_t id : tokenizer_->EncodePlain("reasoning")) expected.push_back(id);
  expected.push_back(end_think);
  for (int32_t id : tokenizer_->EncodePlain("answer")) expected.push_back(id);
  EXPECT_EQ(demo_->Encode("<think>reasoning</think>answer"), expected);
}

// The tokenizer is shared by threads without locking: concurrent calls give the same ids.
TEST_F(DeepSeekGoldenTest, ConcurrentEncodeMatchesHuggingFace) {
  std::atomic<int> num_mismatches{0};
  std::vector<std::thread> threads;
  const Json& cases = golden_.at("cases");
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (const Json& c : cases) {
        if (tokenizer_->Encode(c.at("text").get<std::string>()) != Ids(c.at("ids"))) ++num_mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(num_mismatches.load(), 0);
}

TEST_F(DeepSeekGoldenTest, InvalidUtf8EncodesAsReplacementCharacter) {
  EXPECT_EQ(tokenizer_->Encode("a\xFF" "b"), tokenizer_->Encode("a\xEF\xBF\xBD" "b"));
  EXPECT_EQ(tokenizer_->EncodePlain("\xE4\xBD"), tokenizer_->EncodePlain("\xEF\xBF\xBD"));
}

// Very long pieces go through the heap-based merge and the regex fallbacks without trouble.
TEST_F(DeepSeekGoldenTest, VeryLongInputsRoundTrip) {
  for (const std::string& text : {std::string(200000, 'a'), std::string(100000, ' ') + "x",
                                  std::string(50000, '\n'), std::string(300000, '9')}) {
    const auto ids = tokenizer_->Encode(text);
    EXPECT_EQ(tokenizer_->Decode(ids), text);
  }
}

}  // namespace
}  // namespace flashserve::tokenizer
