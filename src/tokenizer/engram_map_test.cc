// The V4.1 Engram token classes: the normaliser on hand-checked strings (case, accents,
// compatibility forms, whitespace, a lone space) and the map built from the DeepSeek tokenizer
// (skips when third_party/tokenizer is not installed).
#include "tokenizer/engram_map.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace flashserve::tokenizer {
namespace {

const char* const kTokenizerPath = FLASHSERVE_ROOT "/third_party/tokenizer/deepseek_v3/tokenizer.json";

TEST(EngramMapTest, NormaliserFoldsCaseAccentsWidthAndWhitespace) {
  EXPECT_EQ(NormalizeForEngram(" The"), "the");
  EXPECT_EQ(NormalizeForEngram("THE"), "the");
  EXPECT_EQ(NormalizeForEngram("Caf\xC3\xA9"), "cafe");           // é: NFD + accent stripped
  EXPECT_EQ(NormalizeForEngram("\xEF\xBC\xA1\xEF\xBC\xA2"), "ab");  // fullwidth ＡＢ (NFKC)
  EXPECT_EQ(NormalizeForEngram("\xEF\xAC\x81"), "fi");              // ﬁ ligature (NFKC)
  EXPECT_EQ(NormalizeForEngram("a \t\n b"), "a b");
  EXPECT_EQ(NormalizeForEngram(" "), " ");                          // a lone space survives
  EXPECT_EQ(NormalizeForEngram("\n\n"), " ");                       // collapses to one space
  EXPECT_EQ(NormalizeForEngram("  x  "), "x");
  EXPECT_EQ(NormalizeForEngram("\xCE\xA3"), "\xCF\x83");           // Σ -> σ (no final-sigma context)
  EXPECT_EQ(NormalizeForEngram(""), "");
}

// The trimmed result is a string of its own, short (inline in the object) or long (on the heap),
// not a view of a local that is gone when the normaliser returns (which read freed memory and
// gave 3 more classes for the DeepSeek tokenizer; AddressSanitizer builds report it).
TEST(EngramMapTest, TrimmedResultsOwnTheirText) {
  EXPECT_EQ(NormalizeForEngram(" Ab "), "ab");
  EXPECT_EQ(NormalizeForEngram("  " + std::string(200, 'Q') + "  "), std::string(200, 'q'));
  EXPECT_EQ(NormalizeForEngram("\t" + std::string(40, 'Z')), std::string(40, 'z'));
}

TEST(EngramMapTest, DeepSeekTokenizerClasses) {
  if (!std::filesystem::exists(kTokenizerPath)) GTEST_SKIP() << "no tokenizer at " << kTokenizerPath << " (run ./scripts/setup.sh)";
  auto tok = Tokenizer::Load(kTokenizerPath);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  const Tokenizer& t = **tok;
  EngramTokenMap m = BuildEngramTokenMap(t);
  ASSERT_EQ(static_cast<int32_t>(m.classes.size()), t.vocab_size());
  std::printf("vocab %d -> %ld Engram classes\n", t.vocab_size(), static_cast<long>(m.num_classes));
  auto cls = [&](const char* token) { return m.classes[static_cast<size_t>(t.TokenId(token).value())]; };
  EXPECT_EQ(cls("the"), cls("\xC4\xA0The"));  // "the" and " The"
  EXPECT_NE(cls("the"), cls("a"));
  // Classes are numbered in order of first appearance, densely.
  int32_t next = 0;
  for (int32_t c : m.classes) {
    ASSERT_LE(c, next);
    if (c == next) ++next;
  }
  EXPECT_EQ(next, m.num_classes);
  EXPECT_EQ(m.num_classes, 98627);  // the DeepSeek-V3 tokenizer.json of setup.sh (V4.1-Flash: 99092 on its own)
  EXPECT_LT(m.num_classes, t.vocab_size());
  EXPECT_GT(m.num_classes, t.vocab_size() / 2);
}

}  // namespace
}  // namespace flashserve::tokenizer
