#include <gtest/gtest.h>

#include "kv/block_hash.h"
#include "kv/prefix_cache.h"

namespace flashserve::kv {
namespace {

std::vector<int32_t> Tokens(int n, int offset = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = i + offset;
  return t;
}

Payload Bytes(size_t n, char c = 'x') { return std::make_shared<const std::string>(n, c); }

TEST(BlockHashTest, ChainedPerBlockAndNamespaced) {
  BlockHash seed = HashSeed("model-a", "");
  std::vector<int32_t> t = Tokens(300);
  std::vector<BlockHash> h = BlockHashes(seed, t);
  ASSERT_EQ(h.size(), 2u);  // 300 tokens = 2 full blocks
  EXPECT_EQ(h[0], ChainBlock(seed, std::span(t).subspan(0, 128)));
  EXPECT_EQ(h[1], ChainBlock(h[0], std::span(t).subspan(128, 128)));
  // Same tokens, different prefix -> different block key (chaining).
  std::vector<int32_t> u = t;
  u[5] = 999;
  EXPECT_EQ(BlockHashes(seed, u)[1] == h[1], false);
  // Namespaces, models and encodings never collide.
  EXPECT_NE(BlockHashes(HashSeed("model-a", "tenant-1"), t)[0], h[0]);
  EXPECT_NE(BlockHashes(HashSeed("model-b", ""), t)[0], h[0]);
  EXPECT_NE(BlockHashes(HashSeed("model-a", "", 2), t)[0], h[0]);
  // Field boundaries are unambiguous.
  EXPECT_NE(HashSeed("ab", "c"), HashSeed("a", "bc"));
  BlockHash back{};
  ASSERT_TRUE(FromHex(ToHex(h[1]), &back));
  EXPECT_EQ(back, h[1]);
  EXPECT_FALSE(FromHex("zz", &back));
  // Known SHA-256 answer.
  EXPECT_EQ(ToHex(Sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(PrefixCacheTest, LongestPrefixNeedsBlocksAndBoundary) {
  PrefixCache cache(1 << 20);
  std::vector<BlockHash> h = BlockHashes(HashSeed("m", ""), Tokens(128 * 4));
  for (int k = 0; k < 4; ++k) cache.PutBlock(h[k], Bytes(100));
  EXPECT_EQ(cache.Lookup(h).num_blocks, 0);  // no boundary anywhere
  cache.PutBoundary(h[1], Bytes(50, 'b'));
  cache.PutBoundary(h[3], Bytes(50, 'c'));
  PrefixMatch m = cache.Lookup(h);
  EXPECT_EQ(m.num_blocks, 4);
  EXPECT_EQ(m.blocks.size(), 4u);
  EXPECT_EQ((*m.boundary)[0], 'c');
  EXPECT_EQ(cache.Lookup(std::span(h).subspan(0, 3)).num_blocks, 2);  // shorter prompt, earlier boundary
  std::vector<BlockHash> other = BlockHashes(HashSeed("m", "other-tenant"), Tokens(128 * 4));
  EXPECT_EQ(cache.Lookup(other).num_blocks, 0);
  EXPECT_EQ(cache.stats().hits, 2);
}

TEST(PrefixCacheTest, EvictsLeastRecentlyUsedWithinBudget) {
  PrefixCache cache(1000);
  std::vector<BlockHash> h = BlockHashes(HashSeed("m", ""), Tokens(128 * 6));
  for (int k = 0; k < 3; ++k) cache.PutBlock(h[k], Bytes(300));
  EXPECT_EQ(cache.bytes(), 900);
  EXPECT_TRUE(cache.HasBlock(h[0]));
  cache.PutBoundary(h[0], Bytes(10));
  cache.Lookup(std::span(h).subspan(0, 1));  // refreshes block 0 and its boundary
  cache.PutBlock(h[3], Bytes(300));           // evicts block 1 (least recent)
  EXPECT_TRUE(cache.HasBlock(h[0]));
  EXPECT_FALSE(cache.HasBlock(h[1]));
  EXPECT_LE(cache.bytes(), 1000);
  Payload held = Bytes(300, 'z');
  cache.PutBlock(h[4], held);
  cache.PutBlock(h[5], Bytes(300));
  cache.PutBlock(h[2], Bytes(300));
  EXPECT_EQ((*held)[0], 'z');  // eviction never invalidates a payload someone holds
  cache.PutBlock(h[0], Bytes(5000));  // larger than the budget: ignored
  EXPECT_LE(cache.bytes(), 1000);
  EXPECT_GT(cache.stats().evictions, 0);
}

}  // namespace
}  // namespace flashserve::kv
