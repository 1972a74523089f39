// Dataset construction: determinism, lengths (words and exact tokens), shared prefixes,
// multi-turn messages that extend the previous turn, and trace prompts (blocks per hash id,
// exact lengths, clipping, arrivals).
#include "loadgen/dataset.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
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
  EXPECT_EQ(*ParseDatasetKind("trace"), DatasetKind::kTrace);
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

DatasetConfig TraceConfig(int64_t block_tokens) {
  DatasetConfig c;
  c.kind = DatasetKind::kTrace;
  c.num_requests = 0;
  c.trace_block_tokens = block_tokens;
  return c;
}

std::unique_ptr<Dataset> MakeTrace(const DatasetConfig& c, std::vector<protocol::TraceRequest> trace) {
  auto d = Dataset::CreateFromTrace(c, std::move(trace));
  EXPECT_TRUE(d.ok()) << d.error().ToString();
  return std::move(d).value();
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, size_t begin, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(begin + n)};
}

TEST(TraceDatasetTest, EqualHashIdsGiveEqualBlocksAndLengthsAreExact) {
  std::vector<protocol::TraceRequest> trace = {
      {1.0, 3 * 16 + 5, 7, {10, 11, 12}, "a"},  // three blocks + 5 tail tokens
      {1.5, 2 * 16 + 9, 0, {10, 11, 40}, ""},   // the third block is cut to 9 tokens
      {2.0, 3 * 16, 3, {10, 99, 12}, "a"},      // same first id; 12 after another parent
      {2.0, 3 * 16 + 5, 7, {10, 11, 12}, "b"},  // same ids as the first: only the tail differs
  };
  auto d = MakeTrace(TraceConfig(16), trace);
  ASSERT_EQ(d->num_jobs(), 4);
  std::vector<std::vector<int32_t>> p;
  for (int64_t i = 0; i < 4; ++i) p.push_back(d->Make(i).turns.at(0).prompt_ids);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(static_cast<int64_t>(p[i].size()), trace[i].input_tokens) << i;
  EXPECT_EQ(Slice(p[0], 0, 32), Slice(p[1], 0, 32));  // ids 10, 11
  EXPECT_NE(Slice(p[0], 32, 9), Slice(p[1], 32, 9));  // 12 vs 40
  EXPECT_EQ(Slice(p[0], 0, 16), Slice(p[2], 0, 16));  // id 10
  EXPECT_NE(Slice(p[0], 16, 16), Slice(p[2], 16, 16));  // 11 vs 99
  EXPECT_EQ(Slice(p[0], 32, 16), Slice(p[2], 32, 16));  // equal id, equal tokens (whatever precedes it)
  EXPECT_EQ(Slice(p[0], 0, 48), Slice(p[3], 0, 48));
  EXPECT_NE(Slice(p[0], 48, 5), Slice(p[3], 48, 5));  // request-unique tails
  for (const auto& ids : p)
    for (int32_t id : ids) ASSERT_TRUE(id >= kTraceFirstTokenId && id < 32000) << id;
  std::set<int32_t> distinct(p[0].begin(), p[0].end());
  EXPECT_GT(distinct.size(), 40u);  // pseudo-random, not a constant fill
  EXPECT_EQ(d->Make(0).turns[0].prompt_ids, p[0]);  // deterministic
  DatasetConfig other = TraceConfig(16);
  other.seed = 1;
  EXPECT_NE(MakeTrace(other, trace)->Make(0).turns[0].prompt_ids, p[0]);  // the seed changes the content
}

TEST(TraceDatasetTest, JobsCarryOutputSessionArrivalAndIgnoreEos) {
  std::vector<protocol::TraceRequest> trace = {
      {5.0, 10, 7, {1}, "s1"}, {5.25, 10, 0, {2}, ""}, {6.0, 10, 3, {3}, "s2"}};
  DatasetConfig c = TraceConfig(512);
  c.num_requests = 2;
  auto d = MakeTrace(c, trace);
  ASSERT_EQ(d->num_jobs(), 2);
  Job j0 = d->Make(0), j1 = d->Make(1);
  EXPECT_EQ(j0.session, "s1");
  EXPECT_EQ(j1.session, "");
  EXPECT_EQ(j0.turns.at(0).max_tokens, 7);
  EXPECT_EQ(j1.turns.at(0).max_tokens, 1);  // output_length 0: one token
  EXPECT_TRUE(j0.turns[0].ignore_eos);
  EXPECT_TRUE(j0.turns[0].user.empty());
  EXPECT_DOUBLE_EQ(*d->ArrivalS(0), 0.0);
  EXPECT_DOUBLE_EQ(*d->ArrivalS(1), 0.25);
  EXPECT_FALSE(Make(DatasetConfig())->ArrivalS(0).has_value());
}

TEST(TraceDatasetTest, MaxInputLenClipsLongPrompts) {
  std::vector<protocol::TraceRequest> trace = {
      {0, 100, 1, {1, 2}, ""}, {0, 64, 1, {1, 2}, ""}, {0, 65, 1, {1, 2}, ""}, {0, 0, 1, {}, ""}};
  DatasetConfig c = TraceConfig(32);
  c.max_input_len = 64;
  auto d = MakeTrace(c, trace);
  EXPECT_EQ(d->num_clipped(), 2);
  auto clipped = d->Make(0).turns[0].prompt_ids;
  ASSERT_EQ(clipped.size(), 64u);
  EXPECT_EQ(clipped, d->Make(1).turns[0].prompt_ids);  // the clipped part is the shared blocks
  EXPECT_EQ(d->Make(2).turns[0].prompt_ids.size(), 64u);
  EXPECT_EQ(d->Make(3).turns[0].prompt_ids.size(), 1u);  // never empty
  c.max_input_len = 0;
  EXPECT_EQ(MakeTrace(c, trace)->num_clipped(), 0);
}

TEST(TraceDatasetTest, ReadsTheFileAndRejectsBadConfigs) {
  const std::string path = ::testing::TempDir() + "/loadgen_trace_test.jsonl";
  {
    std::ofstream out(path);
    out << "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 4, \"hash_ids\": [7, 8]}\n";
  }
  DatasetConfig c = TraceConfig(512);
  c.trace_path = path;
  auto d = Dataset::Create(c, nullptr);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ((*d)->Make(0).turns[0].prompt_ids.size(), 600u);
  std::filesystem::remove(path);
  EXPECT_FALSE(Dataset::Create(c, nullptr).ok());  // missing file
  c.trace_path = "";
  EXPECT_FALSE(Dataset::Create(c, nullptr).ok());  // no file given
  std::vector<protocol::TraceRequest> one = {{0, 1, 1, {}, ""}};
  EXPECT_FALSE(Dataset::CreateFromTrace(c, {}).ok());  // empty trace
  c.trace_block_tokens = 0;
  EXPECT_FALSE(Dataset::CreateFromTrace(c, one).ok());
  c = TraceConfig(512);
  c.trace_vocab = 150;
  EXPECT_FALSE(Dataset::CreateFromTrace(c, one).ok());
  c = TraceConfig(512);
  c.max_input_len = -1;
  EXPECT_FALSE(Dataset::CreateFromTrace(c, one).ok());
  EXPECT_FALSE(Dataset::CreateFromTrace(DatasetConfig(), one).ok());  // not the trace kind
}

}  // namespace
}  // namespace flashserve::loadgen

namespace flashserve::loadgen {
namespace {

// --turn-image: every user turn carries a new screenshot (a PNG data URL of the asked size, the
// same bytes for the same seed), later turns repeat the earlier ones in their history, and the
// chat body sends them as image_url parts after the text.
TEST(DatasetTest, TurnImagesAreNewEachTurnAndRepeatInTheHistory) {
  DatasetConfig c;
  c.kind = DatasetKind::kMultiTurn;
  c.num_conversations = 2;
  c.turns = 3;
  c.turn_len = 8;
  c.prefix_len = 0;
  c.turn_image_width = 64;
  c.turn_image_height = 40;
  auto d = Make(c);
  const Job job = d->Make(0);
  ASSERT_EQ(job.turns.size(), 3u);
  std::set<std::string> pictures;
  for (const Turn& t : job.turns) {
    ASSERT_EQ(t.images.size(), 1u);
    EXPECT_EQ(t.images[0].rfind("data:image/png;base64,iVBORw0KGgo", 0), 0u) << "a PNG";
    pictures.insert(t.images[0]);
  }
  EXPECT_EQ(pictures.size(), 3u) << "a new screenshot each turn";
  EXPECT_EQ(Make(c)->Make(0).turns[1].images, job.turns[1].images) << "deterministic";
  EXPECT_NE(d->Make(1).turns[0].images, job.turns[0].images);
  const std::vector<std::string> replies = {"a", "b"};
  const std::vector<Message> third = TurnMessages(job, 2, replies);
  ASSERT_EQ(third.size(), 5u);
  EXPECT_EQ(third[0].images, job.turns[0].images);
  EXPECT_EQ(third[4].images, job.turns[2].images);
  EXPECT_TRUE(third[1].images.empty());
  SamplingParams params;
  params.model = "m";
  const auto body = nlohmann::json::parse(BuildRequestBody(ApiKind::kChat, params, third));
  const auto& last = body["messages"][4]["content"];
  ASSERT_TRUE(last.is_array());
  EXPECT_EQ(last[0]["type"], "text");
  EXPECT_EQ(last[1]["image_url"]["url"], job.turns[2].images[0]);
  EXPECT_TRUE(body["messages"][1]["content"].is_string());
  c.turn_image_height = 0;
  EXPECT_FALSE(c.Validate().ok()) << "WxH needs both";
  c.turn_image_height = 9000;
  EXPECT_FALSE(c.Validate().ok());
}

}  // namespace
}  // namespace flashserve::loadgen
