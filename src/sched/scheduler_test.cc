#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <map>
#include <random>

namespace flashserve::sched {
namespace {

// Owns the sequences a test hands to the scheduler (stable addresses), by id.
class Sequences {
 public:
  Sequence* New(uint64_t id, int prompt) {
    Sequence& s = seqs_[id];
    s.id = id;
    s.tokens.assign(static_cast<size_t>(prompt), 7);
    s.num_prompt = prompt;
    return &s;
  }
  Sequence* operator[](uint64_t id) { return &seqs_.at(id); }

 private:
  std::map<uint64_t, Sequence> seqs_;
};

// A prefix cache that restores a fixed number of tokens of every sequence (capped by kv's rule
// the way a real index is), and records what it was asked.
class FixedCache final : public kv::ResumeIndex {
 public:
  explicit FixedCache(int64_t tokens) : tokens_(tokens) {}
  kv::ResumePoint Lookup(const kv::BlockHash& seed, std::span<const int32_t> tokens,
                         std::span<const kv::ImageExtent>) const override {
    ++lookups;
    kv::ResumePoint p;
    p.blocks = tokens_ / kv::kBlockTokens;
    p.blocks_by_tier[0] = p.blocks;
    return p;
  }
  mutable int lookups = 0;

 private:
  int64_t tokens_;
};

constexpr const kv::ResumeIndex* NoCache() { return nullptr; }

void RunPlan(Scheduler& sched, const StepPlan& plan) {
  for (const StepItem& item : plan.items) sched.Commit(item, item.sample ? std::optional<int32_t>(1) : std::nullopt);
}

TEST(SchedulerTest, DecodesFirstThenChunkedPrefillWithinBudget) {
  SchedConfig cfg;
  cfg.max_step_tokens = 100;
  cfg.persist_every_blocks = 0;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  for (uint64_t id = 1; id <= 3; ++id) sched.Add(seqs.New(id, 10));
  StepPlan first = sched.Plan(NoCache());
  ASSERT_EQ(first.items.size(), 3u);  // three 10-token prefills fit in 100
  for (const auto& item : first.items) EXPECT_TRUE(item.sample);
  RunPlan(sched, first);
  sched.Add(seqs.New(4, 1000));
  StepPlan second = sched.Plan(NoCache());
  ASSERT_EQ(second.items.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(second.items[i].end - second.items[i].begin, 1);  // decodes first
  EXPECT_EQ(second.items[3].seq, seqs[4]);
  EXPECT_EQ(second.items[3].end - second.items[3].begin, 97);  // the rest of the budget
  EXPECT_FALSE(second.items[3].sample);
  EXPECT_EQ(second.num_tokens, 100);
  EXPECT_EQ(sched.PendingPromptTokens(), 1000);  // not committed yet
  RunPlan(sched, second);
  EXPECT_EQ(sched.PendingPromptTokens(), 903);   // the router's view of the prefill work ahead
}

TEST(SchedulerTest, PrefillChunksEndAtPersistPoints) {
  SchedConfig cfg;
  cfg.max_step_tokens = 10000;
  cfg.persist_every_blocks = 2;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  sched.Add(seqs.New(1, 1000));
  std::vector<int64_t> ends;
  std::vector<bool> persist;
  for (int step = 0; step < 6; ++step) {
    StepPlan plan = sched.Plan(NoCache());
    ASSERT_EQ(plan.items.size(), 1u);
    ends.push_back(plan.items[0].end);
    persist.push_back(plan.items[0].persist);
    RunPlan(sched, plan);
    if (plan.items[0].sample) break;
  }
  // Every 256 tokens, then the end of input rounded down to a block (896), then the prompt end.
  EXPECT_EQ(ends, (std::vector<int64_t>{256, 512, 768, 896, 1000}));
  EXPECT_EQ(persist, (std::vector<bool>{true, true, true, true, false}));
}

TEST(SchedulerTest, RestoredPrefixStartsAfterTheCachedTokens) {
  SchedConfig cfg;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  sched.Add(seqs.New(1, 300));
  FixedCache cache(256);
  StepPlan plan = sched.Plan(&cache);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_TRUE(plan.items[0].restore);
  EXPECT_EQ(plan.items[0].begin, 256);
  EXPECT_EQ(plan.items[0].end, 300);
  EXPECT_EQ(seqs[1]->num_computed, 256);
  EXPECT_GT(sched.PendingPromptTokens(), 0);
  // A full-prompt hit resumes at a block boundary before the last prompt token (kv's rule: its
  // logits are needed), whatever the index answers.
  Scheduler again(cfg, [](int64_t p) { return p; });
  again.Add(seqs.New(2, 256));
  StepPlan p2 = again.Plan(&cache);
  EXPECT_TRUE(p2.items[0].restore);
  EXPECT_EQ(p2.items[0].begin, 128);
  // Nothing cached: no restore.
  Scheduler cold(cfg, [](int64_t p) { return p; });
  cold.Add(seqs.New(3, 300));
  FixedCache none(0);
  StepPlan p3 = cold.Plan(&none);
  EXPECT_FALSE(p3.items[0].restore);
  EXPECT_EQ(p3.items[0].begin, 0);
}

// One 300-token sequence admitted on a 256-token cache hit (the restore then fails).
struct FailedRestore {
  static SchedConfig Config() {
    SchedConfig cfg;
    cfg.max_step_tokens = 1000;
    cfg.persist_every_blocks = 0;
    return cfg;
  }
  Sequences seqs;
  FixedCache cache{256};
  Scheduler sched{Config(), [](int64_t p) { return p; }};
  StepPlan plan;
  FailedRestore() {
    sched.Add(seqs.New(1, 300));
    plan = sched.Plan(&cache);
  }
};

// Objects evicted between the plan and the restore: the sequence asks the cache again.
TEST(SchedulerTest, ARestoreWhoseObjectsWentLooksAgain) {
  FailedRestore f;
  ASSERT_TRUE(f.plan.items[0].restore);
  EXPECT_EQ(f.sched.pool_used(), 300);
  f.sched.RestoreFailed(f.plan.items[0], /*objects_gone=*/true);
  EXPECT_EQ(f.seqs[1]->status, SeqStatus::kWaiting);
  EXPECT_EQ(f.seqs[1]->num_computed, 0);
  EXPECT_EQ(f.sched.pool_used(), 0);  // nothing held while it waits
  EXPECT_EQ(f.sched.num_waiting(), 1);
  EXPECT_EQ(f.sched.num_preemptions(), 0);
  StepPlan next = f.sched.Plan(&f.cache);
  ASSERT_EQ(next.items.size(), 1u);
  EXPECT_TRUE(next.items[0].restore);  // a second lookup, which still finds the prefix
  EXPECT_EQ(next.items[0].begin, 256);
  EXPECT_EQ(f.cache.lookups, 2);
}

// Objects that do not assemble: the sequence recomputes without the cache, once.
TEST(SchedulerTest, ARestoreOfBadObjectsRecomputesWithoutTheCache) {
  FailedRestore f;
  f.sched.RestoreFailed(f.plan.items[0], /*objects_gone=*/false);
  EXPECT_EQ(f.sched.pool_used(), 0);
  StepPlan next = f.sched.Plan(&f.cache);
  ASSERT_EQ(next.items.size(), 1u);
  EXPECT_FALSE(next.items[0].restore);
  EXPECT_EQ(next.items[0].begin, 0);
  EXPECT_EQ(next.items[0].end, 256);  // up to end of input
  EXPECT_EQ(f.cache.lookups, 1);
  EXPECT_FALSE(f.seqs[1]->skip_cache);  // a later admission (after a preemption) asks again
}

TEST(SchedulerTest, PoolOverflowPreemptsTheNewestAndKeepsItsTokens) {
  SchedConfig cfg;
  cfg.state_pool_bytes = 100;
  cfg.max_step_tokens = 1000;
  Scheduler sched(cfg, [](int64_t p) { return p; });  // one byte per token
  Sequences seqs;
  sched.Add(seqs.New(1, 45));
  sched.Add(seqs.New(2, 45));
  RunPlan(sched, sched.Plan(NoCache()));
  EXPECT_EQ(sched.num_running(), 2);
  for (int step = 0; step < 20 && sched.num_preemptions() == 0; ++step) RunPlan(sched, sched.Plan(NoCache()));
  EXPECT_EQ(sched.num_preemptions(), 1);
  EXPECT_LE(sched.pool_used(), 100);
  Sequence* victim = seqs[2];
  EXPECT_EQ(victim->status, SeqStatus::kWaiting);
  EXPECT_EQ(victim->num_computed, 0);
  EXPECT_GT(victim->tokens.size(), 45u);  // generated tokens kept for the recompute
}

TEST(SchedulerTest, RunningLimitAndRemove) {
  SchedConfig cfg;
  cfg.max_running = 1;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  sched.Add(seqs.New(1, 5));
  sched.Add(seqs.New(2, 5));
  sched.Add(seqs.New(3, 5));  // the loop bounds requests; the scheduler queues whatever it gets
  StepPlan plan = sched.Plan(NoCache());
  EXPECT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(sched.num_running(), 1);
  EXPECT_EQ(sched.num_waiting(), 2);
  EXPECT_TRUE(sched.Remove(seqs[1]));
  EXPECT_FALSE(sched.Remove(seqs[1]));
  EXPECT_TRUE(sched.Remove(seqs[3]));
  EXPECT_EQ(sched.num_waiting(), 1);
  EXPECT_EQ(sched.pool_used(), 0);
}

TEST(SchedulerTest, ForkRunsTheChildWhereThePoolHasRoom) {
  SchedConfig cfg;
  cfg.state_pool_bytes = 25;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  sched.Add(seqs.New(1, 10));
  RunPlan(sched, sched.Plan(NoCache()));
  Sequence* child = seqs.New(2, 0);
  ASSERT_TRUE(sched.Fork(*seqs[1], child));
  EXPECT_EQ(child->id, 2u);
  EXPECT_EQ(child->tokens, seqs[1]->tokens);
  EXPECT_EQ(child->num_computed, 10);
  EXPECT_EQ(sched.pool_used(), 20);
  Sequence* third = seqs.New(3, 0);
  EXPECT_FALSE(sched.Fork(*seqs[1], third));  // no room: queued, recomputes
  EXPECT_EQ(third->status, SeqStatus::kWaiting);
  EXPECT_EQ(third->num_computed, 0);
  EXPECT_EQ(sched.num_waiting(), 1);
}

TEST(SchedulerTest, RandomLoadNeverExceedsThePool) {
  SchedConfig cfg;
  cfg.state_pool_bytes = 5000;
  cfg.max_step_tokens = 300;
  cfg.max_running = 8;
  Scheduler sched(cfg, [](int64_t p) { return 200 + 3 * p; });
  Sequences seqs;
  std::mt19937 rng(1);
  uint64_t next_id = 1;
  int finished = 0;
  for (int step = 0; step < 2000; ++step) {
    if (rng() % 3 == 0) sched.Add(seqs.New(next_id++, 1 + static_cast<int>(rng() % 400)));
    StepPlan plan = sched.Plan(NoCache());
    ASSERT_LE(plan.num_tokens, cfg.max_step_tokens);
    ASSERT_LE(sched.pool_used(), cfg.state_pool_bytes);
    RunPlan(sched, plan);
    for (const auto& item : plan.items) {
      Sequence* s = item.seq;
      if (static_cast<int64_t>(s->tokens.size()) - s->num_prompt >= 20 && sched.Remove(s)) ++finished;
    }
  }
  EXPECT_GT(finished, 100);
}

// A sequence whose pictures are still encoding prefills its text up to the first picture (the
// chunk ends at the block boundary before it, a persist point, then at the picture itself),
// then waits without holding up the sequences behind it; once the limit is lifted it finishes.
TEST(SchedulerTest, InputLimitStopsPrefillAtThePictureWithoutBlockingOthers) {
  SchedConfig cfg;
  cfg.max_step_tokens = 1000;
  cfg.persist_every_blocks = 0;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  Sequence* waiting_for_picture = seqs.New(1, 600);
  waiting_for_picture->input_limit = 300;
  sched.Add(waiting_for_picture);
  sched.Add(seqs.New(2, 50));
  StepPlan first = sched.Plan(NoCache());
  ASSERT_EQ(first.items.size(), 2u);
  EXPECT_EQ(first.items[0].end, 256);  // the text's whole blocks, snapshotted
  EXPECT_TRUE(first.items[0].persist);
  EXPECT_EQ(first.items[1].seq->id, 2u);
  RunPlan(sched, first);
  StepPlan second = sched.Plan(NoCache());
  ASSERT_EQ(second.items.size(), 2u);  // sequence 2 decodes first, then the rest of the text
  EXPECT_EQ(second.items[1].seq->id, 1u);
  EXPECT_EQ(second.items[1].begin, 256);
  EXPECT_EQ(second.items[1].end, 300);
  EXPECT_FALSE(second.items[1].sample);
  RunPlan(sched, second);
  for (const StepItem& item : sched.Plan(NoCache()).items) EXPECT_NE(item.seq->id, 1u) << "ran past its input";
  waiting_for_picture->input_limit = INT64_MAX;
  StepPlan resumed = sched.Plan(NoCache());
  auto it = std::find_if(resumed.items.begin(), resumed.items.end(), [](const StepItem& i) { return i.seq->id == 1u; });
  ASSERT_NE(it, resumed.items.end());
  EXPECT_EQ(it->begin, 300);
  EXPECT_GT(it->end, 300);
}

// A waiting sequence that cannot start before its input arrives (its picture begins at once)
// lets the ones queued behind it be admitted.
TEST(SchedulerTest, AWaitingSequenceWithoutInputLetsOthersIn) {
  SchedConfig cfg;
  cfg.max_step_tokens = 100;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  Sequence* blocked = seqs.New(1, 40);
  blocked->input_limit = 0;
  sched.Add(blocked);
  sched.Add(seqs.New(2, 10));
  StepPlan plan = sched.Plan(NoCache());
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].seq->id, 2u);
  EXPECT_EQ(sched.num_waiting(), 1);
  blocked->input_limit = INT64_MAX;
  RunPlan(sched, plan);
  plan = sched.Plan(NoCache());
  EXPECT_TRUE(std::any_of(plan.items.begin(), plan.items.end(), [](const StepItem& i) { return i.seq->id == 1u && i.end == 40; }));
}

std::vector<std::pair<int64_t, int64_t>> Chunks(Scheduler& sched, Sequence* s) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  while (s->num_computed < s->num_prompt) {
    StepPlan plan = sched.Plan(NoCache());
    for (const StepItem& item : plan.items) chunks.emplace_back(item.begin, item.end);
    RunPlan(sched, plan);
  }
  return chunks;
}

// A bidirectional picture span is computed in one chunk: a chunk that would end inside it ends
// before it, the next takes it whole even past the step's budget; persist points inside it move
// to the block boundary before it, or (periodic ones) to the next one after it.
TEST(SchedulerTest, ChunksNeverCutAnAtomicRange) {
  SchedConfig cfg;
  cfg.max_step_tokens = 100;
  cfg.persist_every_blocks = 0;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  Sequences seqs;
  Sequence* s = seqs.New(1, 600);
  s->atomic_ranges = {{130, 330}, {400, 450}};
  sched.Add(s);
  using Chunk = std::pair<int64_t, int64_t>;
  EXPECT_EQ(Chunks(sched, s), (std::vector<Chunk>{{0, 100}, {100, 130}, {130, 330}, {330, 400}, {400, 500},
                                                  {500, 512}, {512, 600}}));
  cfg.max_step_tokens = 1000;
  cfg.persist_every_blocks = 1;
  Scheduler persisting(cfg, [](int64_t p) { return p; });
  Sequence* t = seqs.New(2, 600);
  t->atomic_ranges = {{100, 300}};
  persisting.Add(t);
  EXPECT_EQ(Chunks(persisting, t), (std::vector<Chunk>{{0, 384}, {384, 512}, {512, 600}}));
  // The snapshot at the end of the input falls inside a range: it moves to the block before it.
  cfg.persist_every_blocks = 0;
  Scheduler tail(cfg, [](int64_t p) { return p; });
  Sequence* u = seqs.New(3, 530);
  u->atomic_ranges = {{300, 520}};
  tail.Add(u);
  StepPlan plan = tail.Plan(NoCache());
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].end, 256);
  EXPECT_TRUE(plan.items[0].persist);
  RunPlan(tail, plan);
  EXPECT_EQ(Chunks(tail, u), (std::vector<Chunk>{{256, 530}}));
  // Two pictures a blank line apart: the point moved out of the second lands in the first and
  // moves again, to the block before the first.
  cfg.persist_every_blocks = 8;
  Scheduler two(cfg, [](int64_t p) { return p; });
  Sequence* v = seqs.New(4, 1095);
  v->atomic_ranges = {{300, 681}, {684, 1065}};
  two.Add(v);
  plan = two.Plan(NoCache());
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].end, 256);
  EXPECT_TRUE(plan.items[0].persist);
}

// A cached prefix that ends inside an atomic range is not resumed (its rows would have seen the
// rows after the cut); one that ends before it is.
TEST(SchedulerTest, ACachedPrefixInsideAnAtomicRangeIsNotResumed) {
  SchedConfig cfg;
  cfg.max_step_tokens = 1000;
  for (const auto& [range, begin] : std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>>{
           {{200, 300}, 0}, {{256, 300}, 256}, {{100, 256}, 256}, {{300, 400}, 256}}) {
    Scheduler sched(cfg, [](int64_t p) { return p; });
    Sequences seqs;
    Sequence* s = seqs.New(1, 500);
    s->atomic_ranges = {range};
    sched.Add(s);
    FixedCache cache(256);
    StepPlan plan = sched.Plan(&cache);
    ASSERT_EQ(plan.items.size(), 1u);
    EXPECT_EQ(plan.items[0].begin, begin) << "range [" << range.first << ", " << range.second << ")";
    EXPECT_EQ(plan.items[0].restore, begin > 0);
  }
}

}  // namespace
}  // namespace flashserve::sched
