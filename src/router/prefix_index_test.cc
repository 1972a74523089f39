#include "router/prefix_index.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>

namespace flashserve::router {
namespace {

std::vector<kv::BlockHash> Chain(int n, const std::string& ns = "") {
  std::vector<int32_t> tokens(static_cast<size_t>(n) * kv::kBlockTokens);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  return kv::BlockHashes(kv::HashSeed("test-model", ns), tokens);
}

void Put(PrefixIndex& index, int w, Tier tier, ObjectKind kind, const kv::BlockHash& h, bool stored = true) {
  ASSERT_TRUE(index.Apply(w, KvEvent{0, stored, {tier, kind, h}}).ok());
}

void PutBlocks(PrefixIndex& index, int w, Tier tier, std::span<const kv::BlockHash> blocks) {
  for (const kv::BlockHash& h : blocks) Put(index, w, tier, ObjectKind::kBlock, h);
}

std::vector<WorkerMatch> MatchAll(const PrefixIndex& index, std::span<const kv::BlockHash> prompt) {
  std::vector<WorkerMatch> out;
  index.Match(prompt, &out);
  return out;
}

TEST(PrefixIndexTest, StoredAndRemovedPerTier) {
  PrefixIndex index;
  const int w0 = index.AddWorker(), w1 = index.AddWorker();
  const auto chain = Chain(4);
  PutBlocks(index, w0, Tier::kMemory, chain);
  Put(index, w0, Tier::kMemory, ObjectKind::kBoundary, chain[3]);
  auto m = MatchAll(index, chain);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[w0].blocks, 4);
  EXPECT_EQ(m[w0].blocks_by_tier[0], 4);
  EXPECT_EQ(m[w0].boundary_tier, Tier::kMemory);
  EXPECT_EQ(m[w1].blocks, 0);
  EXPECT_TRUE(m[w1].live);

  Put(index, w0, Tier::kMemory, ObjectKind::kBoundary, chain[3], /*stored=*/false);
  EXPECT_EQ(MatchAll(index, chain)[w0].blocks, 0);
  Put(index, w0, Tier::kDisk, ObjectKind::kBoundary, chain[3]);
  m = MatchAll(index, chain);
  EXPECT_EQ(m[w0].blocks, 4);
  EXPECT_EQ(m[w0].boundary_tier, Tier::kDisk);

  // Block 1 moves from memory to disk: counted in its best remaining tier.
  Put(index, w0, Tier::kDisk, ObjectKind::kBlock, chain[1]);
  Put(index, w0, Tier::kMemory, ObjectKind::kBlock, chain[1], /*stored=*/false);
  m = MatchAll(index, chain);
  EXPECT_EQ(m[w0].blocks, 4);
  EXPECT_EQ(m[w0].blocks_by_tier[0], 3);
  EXPECT_EQ(m[w0].blocks_by_tier[1], 1);
  // Removing a tier the worker does not hold changes nothing; removing the last one breaks the chain.
  Put(index, w0, Tier::kMemory, ObjectKind::kBlock, chain[1], /*stored=*/false);
  EXPECT_EQ(MatchAll(index, chain)[w0].blocks, 4);
  Put(index, w0, Tier::kDisk, ObjectKind::kBlock, chain[1], /*stored=*/false);
  EXPECT_EQ(MatchAll(index, chain)[w0].blocks, 0);
}

TEST(PrefixIndexTest, ResumeNeedsEveryBlockAndTheBoundary) {
  PrefixIndex index;
  const int w = index.AddWorker();
  const auto chain = Chain(6);
  PutBlocks(index, w, Tier::kMemory, chain);
  EXPECT_EQ(MatchAll(index, chain)[w].blocks, 0);  // no boundary anywhere
  Put(index, w, Tier::kMemory, ObjectKind::kBoundary, chain[1]);
  Put(index, w, Tier::kMemory, ObjectKind::kBoundary, chain[3]);
  EXPECT_EQ(MatchAll(index, chain)[w].blocks, 4);  // the boundary after block 3
  // A prompt that shares only the first 3 blocks resumes at the boundary after block 1.
  EXPECT_EQ(MatchAll(index, std::span(chain).first(3))[w].blocks, 2);
  // Same tokens under another namespace: different hashes, nothing.
  EXPECT_EQ(MatchAll(index, Chain(6, "other"))[w].blocks, 0);
  // A missing block 2 cuts the chain even though the boundary after block 3 exists.
  Put(index, w, Tier::kMemory, ObjectKind::kBlock, chain[2], /*stored=*/false);
  EXPECT_EQ(MatchAll(index, chain)[w].blocks, 2);
}

TEST(PrefixIndexTest, SharedTierVisibleToAll) {
  PrefixIndex index;
  for (int i = 0; i < 3; ++i) index.AddWorker();
  const auto chain = Chain(6);
  for (int b = 0; b < 4; ++b) Put(index, 0, Tier::kShared, ObjectKind::kBlock, chain[b]);
  Put(index, 0, Tier::kShared, ObjectKind::kBoundary, chain[3]);
  PutBlocks(index, 1, Tier::kMemory, std::span(chain).first(2));  // worker 1 also has 2 in memory
  PutBlocks(index, 2, Tier::kMemory, std::span(chain).subspan(4, 2));
  Put(index, 2, Tier::kMemory, ObjectKind::kBoundary, chain[5]);
  const auto m = MatchAll(index, chain);
  EXPECT_EQ(m[0].blocks, 4);
  EXPECT_EQ(m[0].blocks_by_tier[2], 4);
  EXPECT_EQ(m[0].boundary_tier, Tier::kShared);
  EXPECT_EQ(m[1].blocks, 4);
  EXPECT_EQ(m[1].blocks_by_tier[0], 2);
  EXPECT_EQ(m[1].blocks_by_tier[2], 2);
  EXPECT_EQ(m[2].blocks, 6);  // shared 0..3, then its own 4..5 and boundary
  EXPECT_EQ(m[2].blocks_by_tier[0], 2);
  EXPECT_EQ(m[2].blocks_by_tier[2], 4);
  EXPECT_EQ(m[2].boundary_tier, Tier::kMemory);
  // Any worker's removal event removes the shared object for everyone.
  Put(index, 2, Tier::kShared, ObjectKind::kBoundary, chain[3], /*stored=*/false);
  const auto after = MatchAll(index, chain);
  EXPECT_EQ(after[0].blocks, 0);
  EXPECT_EQ(after[2].blocks, 6);
}

TEST(PrefixIndexTest, ResetReplacesPrivateContents) {
  PrefixIndex index;
  const int w = index.AddWorker(), other = index.AddWorker();
  const auto a = Chain(2, "a"), b = Chain(2, "b");
  PutBlocks(index, w, Tier::kMemory, a);
  Put(index, w, Tier::kMemory, ObjectKind::kBoundary, a[1]);
  std::vector<KvObject> snapshot = {{Tier::kDisk, ObjectKind::kBlock, b[0]},
                                    {Tier::kDisk, ObjectKind::kBlock, b[1]},
                                    {Tier::kMemory, ObjectKind::kBoundary, b[1]},
                                    {Tier::kShared, ObjectKind::kBlock, a[0]}};
  ASSERT_TRUE(index.Reset(w, snapshot, 7).ok());
  EXPECT_EQ(MatchAll(index, a)[w].blocks, 0);
  const auto m = MatchAll(index, b);
  EXPECT_EQ(m[w].blocks, 2);
  EXPECT_EQ(m[w].blocks_by_tier[1], 2);
  EXPECT_EQ(m[other].blocks, 0);
  EXPECT_EQ(index.stats().shared_entries, 1);
  EXPECT_EQ(index.stats().private_entries, 3);
  // The snapshot covered events up to 7.
  ASSERT_TRUE(index.Apply(w, KvEvent{7, true, {Tier::kMemory, ObjectKind::kBlock, a[0]}}).ok());
  EXPECT_EQ(index.stats().duplicates, 1);
}

TEST(PrefixIndexTest, RemoveWorker) {
  PrefixIndex index;
  const int w0 = index.AddWorker(), w1 = index.AddWorker();
  const auto chain = Chain(2);
  for (int w : {w0, w1}) {
    PutBlocks(index, w, Tier::kMemory, chain);
    Put(index, w, Tier::kMemory, ObjectKind::kBoundary, chain[1]);
  }
  ASSERT_TRUE(index.RemoveWorker(w0).ok());
  const auto m = MatchAll(index, chain);
  EXPECT_FALSE(m[w0].live);
  EXPECT_EQ(m[w0].blocks, 0);
  EXPECT_EQ(m[w1].blocks, 2);
  EXPECT_FALSE(index.Apply(w0, KvEvent{}).ok());
  EXPECT_FALSE(index.RemoveWorker(w0).ok());
  EXPECT_EQ(index.AddWorker(), 2);  // ids are not reused
  EXPECT_EQ(index.stats().workers, 2);
  ASSERT_TRUE(index.RemoveWorker(w1).ok());
  EXPECT_EQ(index.stats().hashes, 0);
  EXPECT_EQ(index.stats().private_entries, 0);
}

TEST(PrefixIndexTest, SequenceNumbersDedupAndGaps) {
  PrefixIndex index;
  const int w = index.AddWorker();
  const auto chain = Chain(3);
  ASSERT_TRUE(index.Apply(w, KvEvent{1, true, {Tier::kMemory, ObjectKind::kBlock, chain[0]}}).ok());
  ASSERT_TRUE(index.Apply(w, KvEvent{1, false, {Tier::kMemory, ObjectKind::kBlock, chain[0]}}).ok());  // re-sent
  EXPECT_EQ(index.stats().private_entries, 1);
  EXPECT_FALSE(index.NeedsResync(w));
  ASSERT_TRUE(index.Apply(w, KvEvent{5, true, {Tier::kMemory, ObjectKind::kBlock, chain[1]}}).ok());
  EXPECT_TRUE(index.NeedsResync(w));
  EXPECT_EQ(index.stats().gaps, 1);
  EXPECT_EQ(index.stats().private_entries, 2);
  ASSERT_TRUE(index.Reset(w, {}, 5).ok());
  EXPECT_FALSE(index.NeedsResync(w));
  EXPECT_EQ(index.stats().private_entries, 0);
}

TEST(PrefixIndexTest, CapDropsOldestEntries) {
  PrefixIndex index(/*max_entries_per_worker=*/4);
  const int w = index.AddWorker();
  const auto chain = Chain(6);
  PutBlocks(index, w, Tier::kMemory, chain);
  Put(index, w, Tier::kDisk, ObjectKind::kBlock, chain[5]);  // a second tier is not a second entry
  EXPECT_EQ(index.stats().private_entries, 4);
  EXPECT_EQ(index.stats().evicted, 2);
  // Removals then insertions keep the FIFO consistent.
  for (int round = 0; round < 100; ++round) {
    for (const auto& h : chain) Put(index, w, Tier::kMemory, ObjectKind::kBlock, h, round % 2 == 1);
  }
  EXPECT_LE(index.stats().private_entries, 4);
}

// Brute force: per worker, the readable objects, and kv's rule (LongestResumePoint) applied to
// them one worker at a time: the index's one walk over all workers must agree with it.
struct Naive {
  std::map<int, std::set<std::tuple<int, ObjectKind, kv::BlockHash>>> held;  // worker -> (tier, kind, hash)
  std::set<std::pair<ObjectKind, kv::BlockHash>> shared;

  std::optional<Tier> BestTier(int w, const kv::ObjectKey& key) const {
    auto it = held.find(w);
    for (int t = 0; t < 2; ++t) {
      if (it != held.end() && it->second.count({t, key.kind, key.hash})) return static_cast<Tier>(t);
    }
    return shared.count({key.kind, key.hash}) ? std::optional<Tier>(Tier::kShared) : std::nullopt;
  }
  kv::ResumePoint Match(int w, std::span<const kv::BlockHash> prompt) const {
    return kv::LongestResumePoint(prompt, [&](const kv::ObjectKey& key) { return BestTier(w, key); });
  }
};

TEST(PrefixIndexTest, MatchesBruteForceOnRandomEvents) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    PrefixIndex index;
    Naive naive;
    const int workers = 6;
    for (int w = 0; w < workers; ++w) index.AddWorker();
    std::vector<std::vector<kv::BlockHash>> chains = {Chain(8, "x"), Chain(8, "y")};
    for (int e = 0; e < 300; ++e) {
      const int w = static_cast<int>(rng() % workers);
      const auto tier = static_cast<Tier>(rng() % 3);
      const auto kind = static_cast<ObjectKind>(1 + rng() % 2);
      const auto& h = chains[rng() % 2][rng() % 8];
      const bool stored = rng() % 3 != 0;
      Put(index, w, tier, kind, h, stored);
      if (tier == Tier::kShared) {
        stored ? (void)naive.shared.insert({kind, h}) : (void)naive.shared.erase({kind, h});
      } else {
        const auto key = std::make_tuple(static_cast<int>(tier), kind, h);
        stored ? (void)naive.held[w].insert(key) : (void)naive.held[w].erase(key);
      }
      if (e % 10 != 9) continue;
      for (const auto& chain : chains) {
        const auto got = MatchAll(index, chain);
        for (int v = 0; v < workers; ++v) {
          const kv::ResumePoint want = naive.Match(v, chain);
          ASSERT_EQ(got[v].blocks, want.blocks) << "trial " << trial << " event " << e << " worker " << v;
          for (int t = 0; t < 3; ++t) ASSERT_EQ(got[v].blocks_by_tier[t], want.blocks_by_tier[t]);
          if (want.blocks > 0) {
            ASSERT_EQ(got[v].boundary_tier, want.boundary_tier);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace flashserve::router
