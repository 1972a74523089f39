// Character profiles and the classification shortcut over runs of characters: the profile's
// partition of the vocabulary, chains built back equal to chains followed, and per-state
// classes equal to a walk of the whole trie on every state of grammars with bounded strings.
#include "grammar/char_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "grammar/test_util.h"

namespace flashserve::grammar {
namespace {

using protocol::ConstraintKind;

std::bitset<256> JsonStringAscii() {
  std::bitset<256> s;
  for (int b = 0x20; b < 0x80; ++b) s.set(static_cast<size_t>(b));
  s.reset('"');
  s.reset('\\');
  return s;
}

TEST(CharProfile, ReadsCharactersAndStopsWhereTheyEnd) {
  const auto ascii = JsonStringAscii();
  auto read = [&](const std::string& t) { return ReadCharacters(t, ascii); };
  EXPECT_EQ(read("abc").at, 3u);
  EXPECT_EQ(read("abc").chars, 3);
  EXPECT_EQ(read("ab\",").at, 2u);  // the quote ends the run, at a character's start
  EXPECT_EQ(read("ab\",").chars, 2);
  EXPECT_FALSE(read("ab\",").inside);
  EXPECT_EQ(read("\xC3\xA9x").chars, 2);          // é then x
  EXPECT_EQ(read("a\xE4\xBD").at, 3u);            // a partial last character is read
  EXPECT_EQ(read("a\xE4\xBD").chars, 2);
  EXPECT_TRUE(read("\xC3" "A").inside);           // a lead byte without its continuation
  EXPECT_EQ(read("\xC3" "A").at, 1u);
  EXPECT_EQ(read("\x80z").at, 0u);                // a continuation byte cannot start a character
  EXPECT_EQ(read("\xED\xA0\x80").at, 1u);         // no surrogates
  EXPECT_EQ(read("x\n").at, 1u);
}

TEST(CharProfile, SplitsTheVocabularyByCharacters) {
  const std::vector<std::string> words = {"ab", "abc\"", "\xC3\xA9\xC3\xA9", "\xE4\xBD", "x\\n", "\xC3" "A", "   ", "\"}"};
  auto vocab = testing::ByteVocabulary(words);
  const auto ascii = JsonStringAscii();
  ASSERT_NE(vocab->Characters(ascii), nullptr);
  const CharProfile& p = *vocab->Characters(ascii);
  EXPECT_EQ(&p, vocab->Characters(ascii));  // built once
  EXPECT_EQ(vocab->character_profiles(), 1u);
  EXPECT_EQ(p.max_chars(), 3u);  // "   "
  for (size_t limit = 0; limit <= p.max_chars() + 1; ++limit) {
    const auto within = p.Within(limit);
    for (size_t t = 0; t < vocab->size(); ++t) {
      const std::string& bytes = vocab->bytes(static_cast<int32_t>(t));
      const CharacterRun run = ReadCharacters(bytes, ascii);
      const bool whole = !bytes.empty() && run.at == bytes.size();
      const bool in_within = within[t / 32] >> (t % 32) & 1;
      EXPECT_EQ(in_within, whole && static_cast<size_t>(run.chars) <= limit) << "token " << t << " limit " << limit;
      EXPECT_EQ(p.others().bytes(static_cast<int32_t>(t)), whole ? "" : bytes) << "token " << t;
    }
  }
  // The root's exits: where every other token stops being characters.
  const auto& root = p.exits(0);
  EXPECT_TRUE(root.at_start['"'] && root.at_start['\\'] && root.at_start['\n'] && root.at_start[0x80]);
  EXPECT_TRUE(root.inside);  // "\xC3A"
  EXPECT_FALSE(root.at_start['a']);
  EXPECT_EQ(p.max_exit_chars(), 3u);  // "abc" before its quote
}

TEST(CharProfile, AVocabularyKeepsABoundedNumberOfProfiles) {
  auto vocab = testing::ByteVocabulary();
  for (size_t i = 0; i < Vocabulary::kMaxProfiles; ++i) {
    std::bitset<256> set;
    set.set('a' + i);
    EXPECT_NE(vocab->Characters(set), nullptr);
  }
  std::bitset<256> one_more;
  one_more.set('z');
  EXPECT_EQ(vocab->Characters(one_more), nullptr);
  std::bitset<256> first;
  first.set('a');
  EXPECT_NE(vocab->Characters(first), nullptr);  // those kept are still served
}

// Token ids accepted, as a sorted list whatever the representation.
std::vector<int32_t> AcceptedIds(const TokenClasses& c) {
  std::vector<int32_t> out = c.accepted;
  for (size_t w = 0; w < c.accepted_bits.size(); ++w) {
    for (uint32_t b = c.accepted_bits[w]; b; b &= b - 1) out.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(b))));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every state (at most `limit`, spread evenly) classified alone, at the root and under the
// first parent frames a rule resumes in, both ways.
void ExpectClassesEqualTheWalk(const std::shared_ptr<const CompiledGrammar>& g, size_t limit) {
  const Automaton& a = g->automaton();
  const ChainSteps steps(a);
  std::vector<int32_t> contexts = {kAlone, kAtRoot};
  for (size_t s = 0; s < a.num_states() && contexts.size() < 5; ++s) {
    for (const RefEdge& e : a.refs(static_cast<int32_t>(s)))
      if (std::find(contexts.begin(), contexts.end(), e.next) == contexts.end() && contexts.size() < 5) contexts.push_back(e.next);
  }
  const size_t stride = std::max<size_t>(1, a.num_states() / limit);
  for (size_t s = 0; s < a.num_states(); s += stride) {
    for (int32_t context : contexts) {
      const auto state = static_cast<int32_t>(s);
      const TokenClasses fast = ClassifyState(a, g->vocab(), state, context, &steps);
      const TokenClasses walk = ClassifyStateByWalk(a, g->vocab(), state, context);
      ASSERT_EQ(fast.needs_context, walk.needs_context) << "state " << s << " context " << context;
      ASSERT_EQ(AcceptedIds(fast), AcceptedIds(walk)) << "state " << s << " context " << context;
      ASSERT_EQ(fast.uncertain, walk.uncertain) << "state " << s << " context " << context;
    }
  }
}

TEST(CharProfile, ClassesEqualAWalkOnASmallVocabulary) {
  // Tokens that read more characters before a quote than any token made only of characters,
  // runs whose later steps take more bytes than the first, and partial characters.
  auto vocab = testing::ByteVocabulary({"aaaa\"", "aaa\",", "ab1", "a\u00e9\"", "\xC3\xA9\xC3\"", "\xC3", "\"}", "12"});
  for (const auto& [kind, text] : std::vector<std::pair<ConstraintKind, std::string>>{
           {ConstraintKind::kJsonSchema, R"({"type":"string","minLength":2,"maxLength":4})"},
           {ConstraintKind::kJsonSchema, R"({"type":"string","minLength":4})"},
           {ConstraintKind::kJsonSchema, R"({"type":"array","items":{"type":"string","maxLength":3},"maxItems":3})"},
           {ConstraintKind::kRegex, R"([^0-9]{2}.*)"},
           {ConstraintKind::kRegex, R"(.{1,5}"})"}}) {
    SCOPED_TRACE(text);
    auto g = testing::MustCompile(kind, text, vocab);
    ASSERT_NE(g, nullptr);
    ExpectClassesEqualTheWalk(g, 400);
  }
  EXPECT_GE(vocab->character_profiles(), 1u);  // the shortcut ran
}

TEST(CharProfile, ClassesEqualAWalkOfTheWholeTrie) {
  auto vocab = testing::DeepSeekVocabulary();
  if (!vocab) GTEST_SKIP() << "third_party/tokenizer/deepseek_v3/tokenizer.json not installed (scripts/setup.sh)";
  // Bounded strings (each position its own state, the last ones shorter than many tokens), a
  // lower bound, a string longer than the chains followed, strings inside an object (quotes
  // that end them, escapes), and patterned strings whose runs hold no non-ASCII characters.
  const std::vector<std::string> schemas = {
      R"({"type":"string","minLength":3,"maxLength":12})",
      R"({"type":"string","maxLength":400})",
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":6},"b":{"type":"string"}},"required":["a","b"]})",
      R"({"type":"string","pattern":"^[a-z]{2,8}-[0-9]{3}$"})",
      R"({"type":"array","items":{"type":"string","format":"email"},"maxItems":2})",
      R"({})",
  };
  for (const std::string& schema : schemas) {
    SCOPED_TRACE(schema);
    auto g = testing::MustCompile(ConstraintKind::kJsonSchema, schema, vocab);
    ASSERT_NE(g, nullptr);
    ExpectClassesEqualTheWalk(g, 120);
  }
  EXPECT_GE(vocab->character_profiles(), 1u);  // the shortcut ran
}

TEST(ChainSteps, ChainsBuiltBackEqualChainsFollowed) {
  auto vocab = testing::ByteVocabulary();
  for (const std::string& schema : {std::string(R"({"type":"string","minLength":2,"maxLength":300})"),
                                    std::string(R"({"type":"array","items":{"type":"string","maxLength":20},"maxItems":30})"),
                                    std::string(R"({"type":"string","pattern":"^(ab){3,90}c*$"})")}) {
    auto g = testing::MustCompile(ConstraintKind::kJsonSchema, schema, vocab);
    ASSERT_NE(g, nullptr);
    const Automaton& a = g->automaton();
    std::vector<int32_t> order(a.num_states());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), std::mt19937(7));  // chains met from every side
    const ChainSteps steps(a);
    for (int32_t s : order) {
      for (bool chars : {false, true}) {
        const ChainRuns& kept = chars ? steps.CharChain(s) : steps.MainChain(s);
        ASSERT_EQ(kept.runs, steps.Follow(s, chars).runs) << schema << " state " << s << " chars " << chars;
      }
    }
  }
}

}  // namespace
}  // namespace flashserve::grammar
