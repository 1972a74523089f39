// The prefix-cache rule (kv/resume.h): what a prompt can resume from, by tier.
#include "kv/resume.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

namespace flashserve::kv {
namespace {

// A reader's holdings: (kind, block index) -> best tier.
using Holdings = std::map<std::pair<ObjectKind, int64_t>, Tier>;

ResumePoint Resume(const Holdings& held, int64_t num_blocks, std::vector<std::pair<ObjectKind, int64_t>>* asked = nullptr) {
  return LongestResumePoint(num_blocks, [&](ObjectKind kind, int64_t i) -> std::optional<Tier> {
    if (asked) asked->push_back({kind, i});
    auto it = held.find({kind, i});
    return it == held.end() ? std::nullopt : std::optional<Tier>(it->second);
  });
}

constexpr auto B = ObjectKind::kBlock, S = ObjectKind::kBoundary;
constexpr auto M = Tier::kMemory, D = Tier::kDisk, L3 = Tier::kShared;

TEST(ResumeTest, NeedsEveryBlockAndTheBoundaryAfterTheLast) {
  EXPECT_EQ(Resume({}, 4).blocks, 0);
  EXPECT_EQ(Resume({{{B, 0}, M}, {{B, 1}, M}}, 4).blocks, 0);  // blocks without a boundary: nothing
  const Holdings held = {{{B, 0}, M}, {{B, 1}, M}, {{S, 1}, M}, {{B, 2}, M}, {{B, 3}, M}, {{S, 3}, M}};
  EXPECT_EQ(Resume(held, 4).blocks, 4);
  EXPECT_EQ(Resume(held, 3).blocks, 2);  // the prompt allows 3 blocks: the boundary at 2 is missing
  Holdings gap = held;
  gap.erase({B, 2});
  EXPECT_EQ(Resume(gap, 4).blocks, 2);  // a missing block ends the prefix, boundaries after it or not
  EXPECT_EQ(Resume(held, 4).tokens(), 4 * kBlockTokens);
}

TEST(ResumeTest, CountsBlocksByTierAndNamesTheSlowest) {
  const Holdings held = {{{B, 0}, M}, {{B, 1}, D}, {{B, 2}, L3}, {{S, 2}, D}, {{B, 3}, M}};
  const ResumePoint p = Resume(held, 4);
  EXPECT_EQ(p.blocks, 3);
  EXPECT_EQ(p.blocks_by_tier[0], 1);
  EXPECT_EQ(p.blocks_by_tier[1], 1);
  EXPECT_EQ(p.blocks_by_tier[2], 1);  // block 3 is past the last boundary: not counted
  EXPECT_EQ(p.boundary_tier, D);
  EXPECT_EQ(p.slowest(), L3);
  EXPECT_EQ(Resume({{{B, 0}, M}, {{S, 0}, D}}, 1).slowest(), D);  // the boundary counts too
  EXPECT_EQ(ResumePoint{}.slowest(), M);
}

TEST(ResumeTest, AsksInOrderAndNeverPastTheFirstMissingBlock) {
  std::vector<std::pair<ObjectKind, int64_t>> asked;
  Resume({{{B, 0}, M}, {{S, 0}, M}, {{B, 1}, M}}, 5, &asked);
  const std::vector<std::pair<ObjectKind, int64_t>> want = {{B, 0}, {S, 0}, {B, 1}, {S, 1}, {B, 2}};
  EXPECT_EQ(asked, want);
}

TEST(ResumeTest, OverKeys) {
  const std::vector<BlockHash> blocks = BlockHashes(HashSeed("m", ""), std::vector<int32_t>(3 * 128, 7));
  ASSERT_EQ(blocks.size(), 3u);
  const ResumePoint p = LongestResumePoint(std::span<const BlockHash>(blocks), [&](const ObjectKey& key) {
    const bool held = key.hash != blocks[2] && (key.kind == ObjectKind::kBlock || key.hash == blocks[1]);
    return held ? std::optional<Tier>(M) : std::nullopt;
  });
  EXPECT_EQ(p.blocks, 2);
}

TEST(ResumeTest, TheLastPromptTokenIsAlwaysComputed) {
  EXPECT_EQ(MaxResumeBlocks(0), 0);
  EXPECT_EQ(MaxResumeBlocks(1), 0);
  EXPECT_EQ(MaxResumeBlocks(128), 0);  // 127 cacheable tokens: no whole block
  EXPECT_EQ(MaxResumeBlocks(129), 1);
  EXPECT_EQ(MaxResumeBlocks(256), 1);
  EXPECT_EQ(MaxResumeBlocks(257), 2);
}

TEST(ResumeTest, KeysHashByKindAndHash) {
  const BlockHash h = Sha256("x");
  EXPECT_NE(ObjectKeyHasher()({ObjectKind::kBlock, h}), ObjectKeyHasher()({ObjectKind::kBoundary, h}));
  EXPECT_LT((ObjectKey{ObjectKind::kBlock, h}), (ObjectKey{ObjectKind::kBoundary, h}));
}

}  // namespace
}  // namespace flashserve::kv
