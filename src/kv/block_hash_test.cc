#include <gtest/gtest.h>

#include "kv/block_hash.h"

namespace flashserve::kv {
namespace {

std::vector<int32_t> Tokens(int n, int offset = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = i + offset;
  return t;
}

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

}  // namespace
}  // namespace flashserve::kv
