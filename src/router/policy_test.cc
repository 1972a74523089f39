#include "router/policy.h"

#include <gtest/gtest.h>

#include <set>

namespace flashserve::router {
namespace {

constexpr double kSpeed = 1000;  // tokens/s

ChooserConfig Config(Policy policy = Policy::kCacheAware) {
  ChooserConfig c;
  c.policy = policy;
  c.default_prefill_tokens_per_s = kSpeed;
  return c;
}

LoadView Idle(int workers) {
  LoadView v;
  for (int w = 0; w < workers; ++w) {
    v.AddWorker(w);
    WorkerLoad l;
    l.prefill_tokens_per_s = kSpeed;
    EXPECT_TRUE(v.Update(w, l).ok());
  }
  return v;
}

void SetQueued(LoadView& v, int w, int64_t tokens) {
  WorkerLoad l = v.load(w);
  l.queued_prefill_tokens = tokens;
  ASSERT_TRUE(v.Update(w, l).ok());
}

WorkerMatch Cached(int64_t memory, int64_t disk = 0, Tier boundary = Tier::kMemory) {
  WorkerMatch m;
  m.live = true;
  m.blocks = memory + disk;
  m.blocks_by_tier[0] = memory;
  m.blocks_by_tier[1] = disk;
  m.boundary_tier = boundary;
  return m;
}

std::vector<WorkerMatch> NoMatches(int workers) {
  std::vector<WorkerMatch> m(static_cast<size_t>(workers));
  for (auto& x : m) x.live = true;
  return m;
}

TEST(PolicyTest, NamesAndValidation) {
  for (Policy p : {Policy::kRoundRobin, Policy::kLeastLoad, Policy::kCacheAware}) {
    auto parsed = ParsePolicy(PolicyName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_FALSE(ParsePolicy("random").ok());
  EXPECT_TRUE(ChooserConfig().Validate().ok());
  ChooserConfig bad;
  bad.balance_rel_threshold = 0.5;
  EXPECT_FALSE(bad.Validate().ok());
  EXPECT_FALSE(Chooser::Create(bad).ok());
  bad = ChooserConfig();
  bad.min_retry_after_s = 10;
  bad.max_retry_after_s = 5;
  EXPECT_FALSE(bad.Validate().ok());
  bad = ChooserConfig();
  bad.default_prefill_tokens_per_s = 0;
  EXPECT_FALSE(bad.Validate().ok());
}

TEST(PolicyTest, CacheAwareGoesToThePrefixHolder) {
  Chooser chooser(Config());
  LoadView loads = Idle(4);
  auto matches = NoMatches(4);
  matches[2] = Cached(30);  // 3840 of 4000 tokens cached on worker 2
  const Decision d = chooser.Choose(4000, "", matches, loads);
  ASSERT_EQ(d.outcome, Outcome::kRouted);
  EXPECT_EQ(d.worker, 2);
  EXPECT_EQ(d.reason, Reason::kCost);
  EXPECT_EQ(d.cached_tokens, 3840);
  EXPECT_EQ(d.cached_tokens_by_tier[0], 3840);
  EXPECT_NEAR(d.predicted_ttft_s, 0.160, 1e-9);
  // Everything cached: the last token is still computed, so the worker resumes at the last block
  // boundary before it (kv's rule), and the router predicts exactly that.
  const Decision full = chooser.Choose(3840, "", matches, loads);
  EXPECT_EQ(full.cached_tokens, 3712);
}

TEST(PolicyTest, MemoryCreditedOverDiskAndDiskOverNothing) {
  ChooserConfig config = Config();
  config.disk_seconds_per_token = 1e-4;  // 10x cheaper than recomputing at 1000 tokens/s
  Chooser chooser(config);
  LoadView loads = Idle(3);
  auto matches = NoMatches(3);
  matches[0] = Cached(0, 20, Tier::kDisk);
  matches[1] = Cached(20);
  EXPECT_EQ(chooser.Choose(3000, "", matches, loads).worker, 1);
  const TtftPrediction disk = PredictTtft(config, loads.load(0), &matches[0], 3000);
  const TtftPrediction none = PredictTtft(config, loads.load(2), &matches[2], 3000);
  EXPECT_NEAR(disk.seconds, 0.44 + 2560 * 1e-4 + config.boundary_fetch_tokens * 1e-4, 1e-9);
  EXPECT_LT(disk.seconds, none.seconds);
  matches[1] = WorkerMatch{};
  matches[1].live = true;
  EXPECT_EQ(chooser.Choose(3000, "", matches, loads).worker, 0);
}

TEST(PolicyTest, UnhealthyNeverChosen) {
  for (Policy p : {Policy::kRoundRobin, Policy::kLeastLoad, Policy::kCacheAware}) {
    Chooser chooser(Config(p));
    LoadView loads = Idle(3);
    loads.MarkUnhealthy(1);
    auto matches = NoMatches(3);
    matches[1] = Cached(30);
    for (int i = 0; i < 20; ++i) {
      const Decision d = chooser.Choose(4000, "session-" + std::to_string(i), matches, loads);
      ASSERT_EQ(d.outcome, Outcome::kRouted);
      EXPECT_NE(d.worker, 1) << PolicyName(p);
    }
  }
}

TEST(PolicyTest, RoundRobinAndLeastLoad) {
  Chooser rr(Config(Policy::kRoundRobin));
  LoadView loads = Idle(3);
  std::vector<int> picked;
  for (int i = 0; i < 6; ++i) picked.push_back(rr.Choose(100, "", {}, loads).worker);
  EXPECT_EQ(picked, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  Chooser ll(Config(Policy::kLeastLoad));
  SetQueued(loads, 0, 500);
  SetQueued(loads, 2, 300);
  SetQueued(loads, 1, 400);
  EXPECT_EQ(ll.Choose(100, "", {}, loads).worker, 2);
  loads.OnRouted(2, 250);  // optimistic: 550 queued until the next poll
  EXPECT_EQ(loads.load(2).queued_prefill_tokens, 550);
  EXPECT_EQ(ll.Choose(100, "", {}, loads).worker, 1);
  SetQueued(loads, 2, 0);  // the poll replaces the optimistic addition
  EXPECT_EQ(loads.routed_since_poll(2), 0);
  EXPECT_EQ(ll.Choose(100, "", {}, loads).worker, 2);
}

TEST(PolicyTest, ImbalanceBoundOverridesTheCost) {
  ChooserConfig config = Config();
  config.balance_abs_threshold_s = 10;
  config.balance_rel_threshold = 2;
  Chooser chooser(config);
  LoadView loads = Idle(3);
  auto matches = NoMatches(3);
  matches[0] = Cached(150);    // 19,200 of 20,000 tokens cached on worker 0 ...
  SetQueued(loads, 0, 12000);  // ... behind 12 s of queue: cost 12.8 s there, 20 s elsewhere
  Decision d = chooser.Choose(20000, "", matches, loads);
  EXPECT_NE(d.worker, 0);  // 12 s > max(10 s, 2 x 0 s)
  EXPECT_EQ(d.reason, Reason::kBalance);
  // Within the bound the cheapest worker wins (locality kept), not merely the emptiest one.
  matches[2] = Cached(50);    // worker 2: 1 s queued + 13.6 s = 14.6 s; worker 1: 0 + 20 s
  SetQueued(loads, 2, 1000);
  d = chooser.Choose(20000, "", matches, loads);
  EXPECT_EQ(d.worker, 2);
  EXPECT_EQ(d.reason, Reason::kBalance);
  // The bound scales with the least loaded worker: max(10 s, 2 x 7 s) = 14 s admits worker 0.
  SetQueued(loads, 1, 8000);
  SetQueued(loads, 2, 7000);
  d = chooser.Choose(20000, "", matches, loads);
  EXPECT_EQ(d.worker, 0);
  EXPECT_EQ(d.reason, Reason::kCost);
}

TEST(PolicyTest, AffinityBreaksTiesDeterministically) {
  std::set<int> seen;
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int s = 0; s < 40; ++s) {
    const std::string key = "session-" + std::to_string(s);
    Chooser chooser(Config());
    LoadView loads = Idle(8);
    const auto matches = NoMatches(8);
    const Decision first = chooser.Choose(2000, key, matches, loads);
    EXPECT_EQ(first.worker, RendezvousPick(key, all));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(chooser.Choose(2000, key, matches, loads).worker, first.worker);
    seen.insert(first.worker);
  }
  EXPECT_GE(seen.size(), 6u);  // keys spread over the workers
  // A clearly cheaper worker beats the affinity pick.
  Chooser chooser(Config());
  LoadView loads = Idle(8);
  auto matches = NoMatches(8);
  const int home = RendezvousPick("k", all);
  const int other = (home + 1) % 8;
  matches[other] = Cached(10);
  EXPECT_EQ(chooser.Choose(2000, "k", matches, loads).worker, other);
  // Rendezvous is stable when an unrelated worker disappears.
  std::vector<int> fewer;
  for (int w : all) {
    if (w != other) fewer.push_back(w);
  }
  EXPECT_EQ(RendezvousPick("k", fewer), home);
}

TEST(PolicyTest, SaturatedOutcome) {
  ChooserConfig config = Config();
  config.max_queued_prefill_tokens = 10000;
  Chooser chooser(config);
  LoadView loads = Idle(2);
  SetQueued(loads, 0, 25000);
  Decision d = chooser.Choose(100, "", {}, loads);
  EXPECT_EQ(d.worker, 1);  // worker 0 is saturated
  SetQueued(loads, 1, 13500);
  d = chooser.Choose(100, "", {}, loads);
  EXPECT_EQ(d.outcome, Outcome::kSaturated);
  EXPECT_EQ(d.reason, Reason::kAllSaturated);
  EXPECT_EQ(d.retry_after_s, 4);  // worker 1 drains 3500 tokens in 3.5 s
  SetQueued(loads, 1, 500000);
  SetQueued(loads, 0, 500000);
  EXPECT_EQ(chooser.Choose(100, "", {}, loads).retry_after_s, config.max_retry_after_s);
  loads.MarkUnhealthy(0);
  loads.MarkUnhealthy(1);
  d = chooser.Choose(100, "", {}, loads);
  EXPECT_EQ(d.outcome, Outcome::kSaturated);
  EXPECT_EQ(d.reason, Reason::kNoHealthyWorker);
  EXPECT_EQ(d.retry_after_s, config.unhealthy_retry_after_s);
  LoadView empty;
  EXPECT_EQ(chooser.Choose(100, "", {}, empty).reason, Reason::kNoHealthyWorker);
}

TEST(PolicyTest, StaleWorkersMarkedUnhealthy) {
  LoadView loads;
  loads.AddWorker(0);
  loads.AddWorker(3);
  EXPECT_EQ(loads.num_slots(), 4);
  EXPECT_FALSE(loads.present(1));
  WorkerLoad l;
  l.updated_at_s = 100;
  ASSERT_TRUE(loads.Update(0, l).ok());
  l.updated_at_s = 90;
  ASSERT_TRUE(loads.Update(3, l).ok());
  EXPECT_FALSE(loads.Update(1, l).ok());
  EXPECT_EQ(loads.MarkStale(101, 5), 1);
  EXPECT_TRUE(loads.load(0).healthy);
  EXPECT_FALSE(loads.load(3).healthy);
  EXPECT_EQ(loads.num_healthy(), 1);
}

TEST(PolicyTest, RouteUsesThePrefixIndex) {
  PrefixIndex index;
  LoadView loads = Idle(0);
  for (int i = 0; i < 4; ++i) loads.AddWorker(index.AddWorker());
  std::vector<int32_t> tokens(5 * kv::kBlockTokens + 10, 7);
  const auto blocks = kv::BlockHashes(kv::HashSeed("m", ""), tokens);
  for (const auto& h : blocks) ASSERT_TRUE(index.Apply(3, KvEvent{0, true, {Tier::kMemory, ObjectKind::kBlock, h}}).ok());
  ASSERT_TRUE(index.Apply(3, KvEvent{0, true, {Tier::kMemory, ObjectKind::kBoundary, blocks[4]}}).ok());
  Chooser chooser(Config());
  const Decision d = chooser.Route(blocks, static_cast<int64_t>(tokens.size()), "", index, loads);
  EXPECT_EQ(d.worker, 3);
  EXPECT_EQ(d.cached_tokens, 5 * kv::kBlockTokens);
}

std::vector<kv::BlockHash> Prompt(int blocks, int32_t salt = 0) {
  std::vector<int32_t> tokens(static_cast<size_t>(blocks) * kv::kBlockTokens, salt);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] += static_cast<int32_t>(i);
  return kv::BlockHashes(kv::HashSeed("m", ""), tokens);
}

TEST(PolicyTest, SessionTableCreditsThePromptInFlight) {
  for (int64_t table : {int64_t{0}, int64_t{1} << 16}) {
    ChooserConfig config = Config();
    config.session_table_size = table;
    Chooser chooser(config);
    PrefixIndex index;
    LoadView loads = Idle(0);
    for (int i = 0; i < 4; ++i) loads.AddWorker(index.AddWorker());
    const auto turn1 = Prompt(10), turn2 = Prompt(20);  // turn 2 extends turn 1
    const Decision first = chooser.Route(turn1, 10 * 128 + 5, "s", index, loads);
    ASSERT_EQ(first.outcome, Outcome::kRouted);
    loads.OnRouted(first.worker, 2000);  // 2 s queued there; no KV events have arrived yet
    const Decision second = chooser.Route(turn2, 20 * 128 + 10, "s", index, loads);
    if (table == 0) {
      EXPECT_NE(second.worker, first.worker);  // 2 + 2.57 + 2.57 s > 0 + 2.57 + 2.57 s elsewhere
      continue;
    }
    EXPECT_EQ(second.worker, first.worker);  // 2 + 1.29 + 1.29 s with turn 1 credited
    EXPECT_EQ(second.cached_tokens, 10 * 128);
    // A prompt that does not extend turn 1 gets no credit.
    EXPECT_EQ(chooser.Route(Prompt(20, 1), 20 * 128 + 10, "s", index, loads).cached_tokens, 0);
  }
}

TEST(PolicyTest, BusyWorkersGetNewSessionsLast) {
  ChooserConfig config = Config();
  config.busy_weight_tokens = 200000;
  Chooser chooser(config);
  LoadView loads = Idle(8);
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const int home = RendezvousPick("k", all);
  WorkerLoad busy = loads.load(home);
  busy.busy_fraction = 0.5;  // +100 s of score: no longer tied with the idle workers
  ASSERT_TRUE(loads.Update(home, busy).ok());
  const Decision d = chooser.Choose(2000, "k", NoMatches(8), loads);
  EXPECT_NE(d.worker, home);
  EXPECT_NEAR(d.predicted_ttft_s, 2.0, 1e-9);  // the busy term steers; it is not part of the TTFT
}


// A request the router cannot tokenize (Messages, Responses) stays with its session's worker
// whatever the load, as long as that worker is within the imbalance bound.
TEST(PolicyTest, OpaqueRequestsFollowTheirSessionKeyWithinTheBound) {
  Chooser chooser(Config());
  LoadView loads = Idle(4);
  const std::vector<int> all = {0, 1, 2, 3};
  const int home = RendezvousPick("codex-session", all);
  SetQueued(loads, home, static_cast<int64_t>(kSpeed * 5));  // 5 s queued there, none elsewhere
  const auto matches = NoMatches(4);
  EXPECT_EQ(chooser.Choose(0, "codex-session", matches, loads).worker, home);
  EXPECT_NE(chooser.Choose(2000, "codex-session", matches, loads).worker, home);  // a tokenized prompt weighs load
  SetQueued(loads, home, static_cast<int64_t>(kSpeed * 100));  // past the 30 s bound: it moves
  EXPECT_NE(chooser.Choose(0, "codex-session", matches, loads).worker, home);
}

}  // namespace
}  // namespace flashserve::router

namespace flashserve::router {
namespace {

// Pictures go where their source hashes (the same picture, the same encode worker, spread over
// the workers), until that worker's queue runs more than the allowance ahead of the least
// loaded one; the router's own additions count until the next poll.
TEST(PlacePictureTest, AffinityUntilTheQueueRunsAhead) {
  LoadView v = Idle(3);
  const std::vector<int> encoders = {0, 1, 2};
  std::set<int> used;
  for (uint64_t k = 0; k < 64; ++k) {
    const int w = PlacePicture(AffinityHash("picture" + std::to_string(k)), encoders, v, 2);
    EXPECT_EQ(w, PlacePicture(AffinityHash("picture" + std::to_string(k)), encoders, v, 2)) << "stable";
    used.insert(w);
  }
  EXPECT_EQ(used.size(), 3u) << "pictures spread over the encode workers";
  const uint64_t key = AffinityHash("screenshot");
  const int home = PlacePicture(key, encoders, v, 2);
  v.OnImagesRouted(home, 2);
  EXPECT_EQ(PlacePicture(key, encoders, v, 2), home) << "2 ahead: still the warm cache";
  v.OnImagesRouted(home, 1);
  const int other = PlacePicture(key, encoders, v, 2);
  EXPECT_NE(other, home) << "3 ahead: the least loaded worker";
  EXPECT_EQ(v.load(other).queued_images, 0);
  WorkerLoad polled = v.load(home);
  polled.queued_images = 0;
  ASSERT_TRUE(v.Update(home, polled).ok());
  EXPECT_EQ(PlacePicture(key, encoders, v, 2), home) << "its queue drained: back home";
}

}  // namespace
}  // namespace flashserve::router
