// Token masks against the naive reference (advance over each token and roll back), along
// random walks through several grammars, on a small vocabulary whose tokens cross rule
// boundaries and on the DeepSeek vocabulary; plus rollback, end tokens and no dead ends.
#include <gtest/gtest.h>

#include <random>

#include "grammar/test_util.h"

namespace flashserve::grammar {
namespace {

using protocol::ConstraintKind;

const std::vector<std::string> kWords = {
    "{\"", "\":", "\": ", "\",", "\", \"", "\"}", "\"]", "\"},", "}}", "]}", ", ", ",\n", "\n  ", "  \"",
    "true", "false", "null", "12", "123", ".5", "e1", "-1", "name", "\\u00", "\\n", "\"\"", "[{", "}]", "ab", "abc"};

const char* const kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":12},"n":{"type":"integer","minimum":-5,"maximum":500},
    "tags":{"type":"array","items":{"enum":["a","b","ab"]},"maxItems":3},
    "sub":{"anyOf":[{"type":"null"},{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}]}},
    "required":["name","n"]})";

std::vector<uint32_t> NaiveMask(Matcher& m) {
  const size_t size = m.grammar().vocab().size();
  std::vector<uint32_t> mask((size + 31) / 32, 0);
  for (size_t t = 0; t < size; ++t) {
    if (m.IsAllowed(static_cast<int32_t>(t))) mask[t / 32] |= 1u << (t % 32);
  }
  return mask;
}

std::vector<int32_t> Allowed(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < mask.size() * 32; ++t) {
    if (mask[t / 32] >> (t % 32) & 1) out.push_back(static_cast<int32_t>(t));
  }
  return out;
}

// Walks `steps` random allowed tokens, checking each mask against the naive one.
void CheckWalk(const std::shared_ptr<const CompiledGrammar>& g, uint32_t seed, int steps) {
  Matcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(g->vocab().mask_words());
  for (int step = 0; step < steps && !m.terminated(); ++step) {
    m.FillMask(mask);
    const std::vector<uint32_t> naive = NaiveMask(m);
    ASSERT_EQ(mask, naive) << "seed " << seed << " step " << step;
    const std::vector<int32_t> allowed = Allowed(mask);
    ASSERT_FALSE(allowed.empty()) << "dead end at step " << step;  // never blocks everything
    // Prefer tokens that are not the end, so walks go deep.
    int32_t pick = allowed[rng() % allowed.size()];
    if (allowed.size() > 1 && pick == g->vocab().end_tokens()[0]) pick = allowed[rng() % (allowed.size() - 1)];
    ASSERT_TRUE(m.AcceptToken(pick));
  }
}

TEST(Mask, EqualsTheNaiveCheckOnASmallVocabulary) {
  auto vocab = testing::ByteVocabulary(kWords);
  const std::vector<std::pair<ConstraintKind, std::string>> cases = {
      {ConstraintKind::kJsonSchema, kSchema},
      {ConstraintKind::kJsonObject, ""},
      {ConstraintKind::kRegex, "(ab|abc)+[0-9]{1,3}(\\.5)?"},
      {ConstraintKind::kGrammar, "root ::= item (\", \" item)*\nitem ::= \"name\" | \"[\" root? \"]\" | [0-9]+"},
  };
  for (const auto& [kind, text] : cases) {
    auto g = testing::MustCompile(kind, text, vocab);
    ASSERT_NE(g, nullptr);
    for (uint32_t seed = 1; seed <= 12; ++seed) CheckWalk(g, seed, 60);
  }
}

TEST(Mask, RollbackRestoresTheSameMasks) {
  auto g = testing::MustCompile(ConstraintKind::kJsonSchema, kSchema, testing::ByteVocabulary(kWords));
  Matcher m(g);
  std::vector<uint32_t> before(g->vocab().mask_words()), after(before.size());
  ASSERT_TRUE(m.AcceptBytes("{\"name\": \"x"));
  m.FillMask(before);
  for (int32_t t : {static_cast<int32_t>('y'), static_cast<int32_t>('"'), static_cast<int32_t>(',')}) ASSERT_TRUE(m.AcceptToken(t));
  m.Rollback(3);
  m.FillMask(after);
  EXPECT_EQ(before, after);
  EXPECT_FALSE(m.AcceptToken('\n'));  // refused tokens change nothing
  m.FillMask(after);
  EXPECT_EQ(before, after);
}

TEST(Mask, EndTokenOnlyWhereTheGrammarMayEnd) {
  auto vocab = testing::ByteVocabulary();
  const int32_t end = vocab->end_tokens()[0];
  auto g = testing::MustCompile(ConstraintKind::kRegex, "a+", vocab);
  Matcher m(g);
  EXPECT_FALSE(m.IsAllowed(end));
  ASSERT_TRUE(m.AcceptToken('a'));
  EXPECT_TRUE(m.IsAllowed(end));
  EXPECT_FALSE(m.IsComplete());
  ASSERT_TRUE(m.AcceptToken(end));
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.AcceptToken('a'));
  auto fixed = testing::MustCompile(ConstraintKind::kChoice, R"(["ok"])", vocab);
  Matcher f(fixed);
  ASSERT_TRUE(f.AcceptBytes("ok"));
  EXPECT_TRUE(f.IsComplete());
  std::vector<uint32_t> mask(vocab->mask_words());
  f.FillMask(mask);
  EXPECT_EQ(Allowed(mask), std::vector<int32_t>{end});
}

TEST(Mask, EqualsTheNaiveCheckOnTheDeepSeekVocabulary) {
  auto vocab = testing::DeepSeekVocabulary();
  if (!vocab) GTEST_SKIP() << "third_party/tokenizer/deepseek_v3/tokenizer.json not installed (scripts/setup.sh)";
  auto g = testing::MustCompile(ConstraintKind::kJsonSchema, kSchema, vocab);
  ASSERT_NE(g, nullptr);
  for (uint32_t seed = 1; seed <= 2; ++seed) CheckWalk(g, seed, 12);
  // A counted string (a chain of states, each taking one character) and a loop (a plain string).
  auto counted = testing::MustCompile(ConstraintKind::kJsonSchema, R"({"type":"array","items":{"type":"string","maxLength":40},"maxItems":2})", vocab);
  CheckWalk(counted, 3, 16);
  // Character chains: a bounded string with a lower bound, and a counted class that excludes
  // ASCII letters (non-ASCII tokens are taken whole along the chain, letters never).
  auto bounded = testing::MustCompile(ConstraintKind::kJsonSchema, R"({"type":"string","minLength":3,"maxLength":9})", vocab);
  for (uint32_t seed = 4; seed <= 5; ++seed) CheckWalk(bounded, seed, 10);
  auto no_letters = testing::MustCompile(ConstraintKind::kRegex, R"([^a-zA-Z"]{2,30}x)", vocab);
  CheckWalk(no_letters, 6, 12);
}

}  // namespace
}  // namespace flashserve::grammar
