#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <random>

namespace flashserve::sched {
namespace {

Sequence Seq(uint64_t id, int prompt) {
  Sequence s;
  s.id = id;
  s.tokens.assign(static_cast<size_t>(prompt), 7);
  s.num_prompt = prompt;
  return s;
}

AdmitHooks NoCache() {
  return {[](const Sequence&) { return int64_t{0}; }, [](Sequence&, int64_t) { return int64_t{0}; }};
}

void RunPlan(Scheduler& sched, const StepPlan& plan) {
  for (const StepItem& item : plan.items) sched.Commit(item, item.sample ? std::optional<int32_t>(1) : std::nullopt);
}

TEST(SchedulerTest, DecodesFirstThenChunkedPrefillWithinBudget) {
  SchedConfig cfg;
  cfg.max_step_tokens = 100;
  cfg.persist_every_blocks = 0;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(sched.Add(Seq(id, 10)).ok());
  StepPlan first = sched.Plan(NoCache());
  ASSERT_EQ(first.items.size(), 3u);  // three 10-token prefills fit in 100
  for (const auto& item : first.items) EXPECT_TRUE(item.sample);
  RunPlan(sched, first);
  ASSERT_TRUE(sched.Add(Seq(4, 1000)).ok());
  StepPlan second = sched.Plan(NoCache());
  ASSERT_EQ(second.items.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(second.items[i].end - second.items[i].begin, 1);  // decodes first
  EXPECT_EQ(second.items[3].seq_id, 4u);
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
  ASSERT_TRUE(sched.Add(Seq(1, 1000)).ok());
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
  ASSERT_TRUE(sched.Add(Seq(1, 300)).ok());
  int64_t restored = -1;
  AdmitHooks hooks{[](const Sequence&) { return int64_t{256}; }, [&](Sequence&, int64_t n) { return restored = n; }};
  StepPlan plan = sched.Plan(hooks);
  EXPECT_EQ(restored, 256);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].begin, 256);
  EXPECT_EQ(plan.items[0].end, 300);
  // A full-prompt hit still recomputes the last prompt token (its logits are needed).
  Scheduler again(cfg, [](int64_t p) { return p; });
  ASSERT_TRUE(again.Add(Seq(2, 256)).ok());
  AdmitHooks all{[](const Sequence&) { return int64_t{256}; }, [](Sequence&, int64_t n) { return n; }};
  StepPlan p2 = again.Plan(all);
  EXPECT_EQ(p2.items[0].begin, 255);
}

TEST(SchedulerTest, PoolOverflowPreemptsTheNewestAndKeepsItsTokens) {
  SchedConfig cfg;
  cfg.state_pool_bytes = 100;
  cfg.max_step_tokens = 1000;
  Scheduler sched(cfg, [](int64_t p) { return p; });  // one byte per token
  ASSERT_TRUE(sched.Add(Seq(1, 45)).ok());
  ASSERT_TRUE(sched.Add(Seq(2, 45)).ok());
  RunPlan(sched, sched.Plan(NoCache()));
  EXPECT_EQ(sched.num_running(), 2);
  for (int step = 0; step < 20 && sched.num_preemptions() == 0; ++step) RunPlan(sched, sched.Plan(NoCache()));
  EXPECT_EQ(sched.num_preemptions(), 1);
  EXPECT_LE(sched.pool_used(), 100);
  Sequence* victim = sched.Find(2);
  ASSERT_NE(victim, nullptr);
  EXPECT_EQ(victim->status, SeqStatus::kWaiting);
  EXPECT_EQ(victim->num_computed, 0);
  EXPECT_GT(victim->tokens.size(), 45u);  // generated tokens kept for the recompute
}

TEST(SchedulerTest, QueueLimitAndRunningLimit) {
  SchedConfig cfg;
  cfg.max_waiting = 2;
  cfg.max_running = 1;
  Scheduler sched(cfg, [](int64_t p) { return p; });
  ASSERT_TRUE(sched.Add(Seq(1, 5)).ok());
  ASSERT_TRUE(sched.Add(Seq(2, 5)).ok());
  EXPECT_EQ(sched.Add(Seq(3, 5)).error().code(), base::ErrorCode::kResourceExhausted);
  StepPlan plan = sched.Plan(NoCache());
  EXPECT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(sched.num_running(), 1);
  EXPECT_EQ(sched.num_waiting(), 1);
  EXPECT_TRUE(sched.Remove(1));
  EXPECT_FALSE(sched.Remove(1));
  EXPECT_EQ(sched.pool_used(), 0);
}

TEST(SchedulerTest, RandomLoadNeverExceedsThePool) {
  SchedConfig cfg;
  cfg.state_pool_bytes = 5000;
  cfg.max_step_tokens = 300;
  cfg.max_running = 8;
  Scheduler sched(cfg, [](int64_t p) { return 200 + 3 * p; });
  std::mt19937 rng(1);
  uint64_t next_id = 1;
  int finished = 0;
  for (int step = 0; step < 2000; ++step) {
    if (rng() % 3 == 0) (void)sched.Add(Seq(next_id++, 1 + static_cast<int>(rng() % 400)));
    StepPlan plan = sched.Plan(NoCache());
    ASSERT_LE(plan.num_tokens, cfg.max_step_tokens);
    ASSERT_LE(sched.pool_used(), cfg.state_pool_bytes);
    RunPlan(sched, plan);
    for (const auto& item : plan.items) {
      Sequence* s = sched.Find(item.seq_id);
      if (s && static_cast<int64_t>(s->tokens.size()) - s->num_prompt >= 20) {
        sched.Remove(item.seq_id);
        ++finished;
      }
    }
  }
  EXPECT_GT(finished, 100);
}

}  // namespace
}  // namespace flashserve::sched
