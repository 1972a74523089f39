// UTF-8 validation and lossy decoding against the Unicode standard's examples (Table 3-8), plus
// properties over pseudo-random byte strings.
#include "tokenizer/utf8.h"

#include <random>

#include <gtest/gtest.h>

namespace flashserve::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, ValidTextPasses) {
  for (const std::string& s : {std::string(), std::string("plain ascii"), std::string("caf\xC3\xA9"),
                               std::string("\xE4\xBD\xA0\xE5\xA5\xBD"), std::string("\xF0\x9F\x98\x80"),
                               std::string("\xF4\x8F\xBF\xBF"), std::string("\xEF\xBF\xBD"),
                               std::string("a\0b", 3)}) {
    EXPECT_TRUE(ValidateUtf8(s).ok());
    EXPECT_EQ(FindInvalidUtf8(s), s.size());
    EXPECT_EQ(LossyUtf8(s), s);
    EXPECT_EQ(StableUtf8PrefixLength(s), s.size());
  }
}

TEST(Utf8Test, ReportsTheByteOffset) {
  const struct {
    std::string text;
    size_t offset;
  } cases[] = {{"abc\xFF", 3},          {"\x80", 0},          {"ab\xC0\xAF", 2},     {"x\xED\xA0\x80", 1},
               {"0123456789\xF4\x90\x80\x80", 10}, {"\xE4\xBD", 0}, {"ok\xF0\x9F\x98", 2}, {"\xC3\xA9\xC3", 2}};
  for (const auto& c : cases) {
    EXPECT_EQ(FindInvalidUtf8(c.text), c.offset);
    auto status = ValidateUtf8(c.text);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error().code(), base::ErrorCode::kInvalidUtf8);
    EXPECT_NE(status.error().message().find("byte offset " + std::to_string(c.offset)), std::string::npos)
        << status.error().message();
  }
}

// Unicode 15, section 3.9, Table 3-8: U+FFFD for each maximal subpart.
TEST(Utf8Test, LossyDecodeUsesMaximalSubparts) {
  EXPECT_EQ(LossyUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  EXPECT_EQ(LossyUtf8("\xC0\xAF"), kFffd + kFffd);                   // overlong
  EXPECT_EQ(LossyUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);       // surrogate
  EXPECT_EQ(LossyUtf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // above U+10FFFF
  EXPECT_EQ(LossyUtf8("\xF0\x9F\x98"), kFffd);                        // truncated at the end
  EXPECT_EQ(LossyUtf8("\xE2\x82\x41"), kFffd + "A");
}

TEST(Utf8Test, StablePrefixHoldsBackOnlyAPossibleCharacter) {
  EXPECT_EQ(StableUtf8PrefixLength("ab\xE4"), 2u);
  EXPECT_EQ(StableUtf8PrefixLength("ab\xE4\xBD"), 2u);
  EXPECT_EQ(StableUtf8PrefixLength("ab\xE4\xBD\xA0"), 5u);
  EXPECT_EQ(StableUtf8PrefixLength("ab\xFF"), 3u);          // never completes
  EXPECT_EQ(StableUtf8PrefixLength("ab\xE0\x80"), 4u);      // E0 80 can never complete
  EXPECT_EQ(StableUtf8PrefixLength("\xF0\x9F\x98\x80\xF0"), 4u);
  EXPECT_EQ(StableUtf8PrefixLength("\x9F\x98\x80\xF0\x9F"), 3u);
  EXPECT_EQ(StableUtf8PrefixLength(""), 0u);
}

// Lossy output is valid; decoding the stable prefix and the rest separately changes nothing.
TEST(Utf8Test, RandomBytesProperties) {
  std::mt19937 rng(1234);
  const uint8_t interesting[] = {0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes(rng() % 12, '\0');
    for (char& c : bytes) c = static_cast<char>(interesting[rng() % sizeof(interesting)]);
    const std::string lossy = LossyUtf8(bytes);
    ASSERT_TRUE(ValidateUtf8(lossy).ok());
    const size_t stable = StableUtf8PrefixLength(bytes);
    ASSERT_GE(stable + 3, bytes.size());
    ASSERT_EQ(LossyUtf8(bytes.substr(0, stable)) + LossyUtf8(bytes.substr(stable)), lossy);
    if (ValidateUtf8(bytes).ok()) {
      ASSERT_EQ(lossy, bytes);
    }
  }
}

}  // namespace
}  // namespace flashserve::tokenizer
