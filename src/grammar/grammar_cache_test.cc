// The compiled-grammar cache: one compilation per distinct constraint, hits after it, refusals
// counted apart, and the least recently used grammars leaving once the byte budget is passed.
#include <gtest/gtest.h>

#include "grammar/test_util.h"

namespace flashserve::grammar {
namespace {

using protocol::ConstraintKind;

TEST(GrammarCache, CompilesOnceThenHits) {
  GrammarCache cache(testing::ByteVocabulary());
  auto a = cache.Get({ConstraintKind::kRegex, "[a-z]+"});
  auto b = cache.Get({ConstraintKind::kRegex, "[a-z]+"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_FALSE(cache.Get({ConstraintKind::kRegex, "(?=x)"}).ok());
  EXPECT_NE(cache.Get({ConstraintKind::kChoice, R"(["[a-z]+"])"})->get(), a->get()) << "the kind is part of the key";
  const GrammarCache::Stats s = cache.stats();
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_GT(s.bytes, 0u);
}

TEST(GrammarCache, KeepsWithinItsByteBudget) {
  GrammarCache cache(testing::ByteVocabulary(), /*max_bytes=*/1);  // room for the newest only
  auto first = cache.Get({ConstraintKind::kRegex, "a+"});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(cache.Get({ConstraintKind::kRegex, "b+"}).ok());
  EXPECT_EQ(cache.stats().entries, 1u);
  ASSERT_TRUE(cache.Get({ConstraintKind::kRegex, "a+"}).ok());
  EXPECT_EQ(cache.stats().misses, 3u) << "the first was evicted and compiled again";
  Matcher m(*first);  // a grammar in use outlives its eviction
  EXPECT_TRUE(m.AcceptBytes("aa"));
}

}  // namespace
}  // namespace flashserve::grammar
