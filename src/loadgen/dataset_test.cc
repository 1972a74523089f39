// Dataset construction: determinism, lengths (words and exact tokens), shared prefixes, and
// multi-turn messages that extend the previous turn.
#include "loadgen/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

namespace flashserve::loadgen {
namespace {

int64_t Words(const std::string& text) {
  std::istringstream in(text);
  int64_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

std::unique_ptr<Dataset> Make(const DatasetConfig& c, const tokenizer::Tokenizer* tok = nullptr) {
  auto d = Dataset::Create(c, tok);
  EXPECT_TRUE(d.ok()) << d.error().ToString();
  return std::move(d).value();
}

TEST(DatasetTest, ParsesKindNames) {
  EXPECT_EQ(*ParseDatasetKind("shared-prefix"), DatasetKind::kSharedPrefix);
  EXPECT_EQ(DatasetKindName(*ParseDatasetKind("multi-turn")), "multi-turn");
  EXPECT_FALSE(ParseDatasetKind("sharegpt").ok());
}

TEST(DatasetTest, RejectsBadConfigs) {
  auto bad = [](auto mutate) {
    DatasetConfig c;
    mutate(c);
    return !Dataset::Create(c, nullptr).ok();
  };
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.input_len = 0; }));
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.output_len = -1; }));
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.range_ratio = 1.0; }));
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.num_requests = -1; }));
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.kind = DatasetKind::kSharedPrefix, c.num_prefixes = 0; }));
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.kind = DatasetKind::kMultiTurn, c.turns = 0; }));
  EXPECT_TRUE(bad([](DatasetConfig& c) { c.kind = DatasetKind::kMultiTurn, c.prefix_len = -1; }));
  EXPECT_FALSE(bad([](DatasetConfig& c) { c.kind = DatasetKind::kMultiTurn, c.prefix_len = 0; }));
}

TEST(DatasetTest, RandomJobsAreDeterministicDistinctAndSizedInWords) {
  DatasetConfig c;
  c.input_len = 50;
  c.output_len = 20;
  c.range_ratio = 0.5;
  c.seed = 9;
  auto d = Make(c);
  std::set<std::string> prompts;
  for (int64_t i = 0; i < 40; ++i) {
    Job job = d->Make(i);
    ASSERT_EQ(job.turns.size(), 1u);
    EXPECT_TRUE(job.system.empty());
    EXPECT_EQ(job.turns[0].user, d->Make(i).turns[0].user);
    int64_t words = Words(job.turns[0].user);
    EXPECT_GE(words, 25);
    EXPECT_LE(words, 75);
    EXPECT_GE(job.turns[0].max_tokens, 10);
    EXPECT_LE(job.turns[0].max_tokens, 30);
    prompts.insert(job.turns[0].user);
  }
  EXPECT_EQ(prompts.size(), 40u);
  c.seed = 10;
  EXPECT_NE(Make(c)->Make(0).turns[0].user, d->Make(0).turns[0].user);
  c.range_ratio = 0;
  EXPECT_EQ(Words(Make(c)->Make(3).turns[0].user), 50);
}

TEST(DatasetTest, SharedPrefixRequestsShareTheirPrefixExactly) {
  DatasetConfig c;
  c.kind = DatasetKind::kSharedPrefix;
  c.num_prefixes = 3;
  c.prefix_len = 200;
  c.suffix_len = 10;
  auto d = Make(c);
  ASSERT_EQ(d->prefixes().size(), 3u);
  EXPECT_NE(d->prefixes()[0], d->prefixes()[1]);
  EXPECT_EQ(Words(d->prefixes()[2]), 200);
  std::set<std::string> suffixes;
  for (int64_t i = 0; i < 12; ++i) {
    Job job = d->Make(i);
    EXPECT_EQ(job.system, d->prefixes()[i % 3]);
    EXPECT_EQ(Words(job.turns[0].user), 10);
    suffixes.insert(job.turns[0].user);
  }
  EXPECT_EQ(suffixes.size(), 12u);
  EXPECT_EQ(d->num_jobs(), c.num_requests);
}

TEST(DatasetTest, MultiTurnTurnKContainsTurnKMinusOne) {
  DatasetConfig c;
  c.kind = DatasetKind::kMultiTurn;
  c.num_conversations = 2;
  c.turns = 4;
  c.turn_len = 8;
  c.prefix_len = 30;
  c.num_prefixes = 1;
  auto d = Make(c);
  EXPECT_EQ(d->num_jobs(), 2);
  Job job = d->Make(1);
  ASSERT_EQ(job.turns.size(), 4u);
  EXPECT_EQ(job.system, d->prefixes()[0]);
  EXPECT_NE(d->Make(0).turns[0].user, job.turns[0].user);
  std::vector<std::string> replies = {"reply zero", "reply one", "reply two"};
  std::vector<Message> prev = TurnMessages(job, 0, replies);
  ASSERT_EQ(prev.size(), 2u);
  EXPECT_EQ(prev[0].role, "system");
  for (int32_t k = 1; k < 4; ++k) {
    std::vector<Message> cur = TurnMessages(job, k, replies);
    ASSERT_EQ(cur.size(), prev.size() + 2);
    for (size_t i = 0; i < prev.size(); ++i) {
      EXPECT_EQ(cur[i].role, prev[i].role);
      EXPECT_EQ(cur[i].content, prev[i].content);
    }
    EXPECT_EQ(cur[prev.size()].role, "assistant");
    EXPECT_EQ(cur[prev.size()].content, replies[k - 1]);
    EXPECT_EQ(cur.back().role, "user");
    EXPECT_EQ(cur.back().content, job.turns[k].user);
    prev = cur;
  }
  c.prefix_len = 0;
  EXPECT_TRUE(Make(c)->Make(0).system.empty());
}

TEST(DatasetTest, TokenizerGivesExactTokenLengths) {
  std::string path = std::string(FLASHSERVE_ROOT) + "/third_party/tokenizer/deepseek_v3/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no tokenizer at " << path;
  auto tok = tokenizer::Tokenizer::Load(path);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  DatasetConfig c;
  c.kind = DatasetKind::kSharedPrefix;
  c.num_prefixes = 2;
  c.prefix_len = 1000;
  c.suffix_len = 37;
  auto d = Make(c, tok->get());
  for (const std::string& p : d->prefixes()) EXPECT_EQ((*tok)->EncodePlain(p).size(), 1000u);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ((*tok)->EncodePlain(d->Make(i).turns[0].user).size(), 37u);
  c.kind = DatasetKind::kRandom;
  c.input_len = 1;
  EXPECT_EQ((*tok)->EncodePlain(Make(c, tok->get())->Make(0).turns[0].user).size(), 1u);
  c.input_len = 333;
  c.range_ratio = 0.2;
  auto r = Make(c, tok->get());
  for (int64_t i = 0; i < 5; ++i) {
    size_t n = (*tok)->EncodePlain(r->Make(i).turns[0].user).size();
    EXPECT_GE(n, 266u);
    EXPECT_LE(n, 400u);
  }
}

}  // namespace
}  // namespace flashserve::loadgen
