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

// Two different pictures at the same place in the same prompt: every image position carries the
// same placeholder id, so only the content key tells them apart. The span starts inside block 1
// and runs across blocks 2 and 3; cached blocks must stop at the image's first block.
TEST(BlockHashTest, PicturesAtTheSamePlaceNeverShareABlock) {
  constexpr int32_t kImageId = 129264;
  std::vector<int32_t> t = Tokens(700);
  for (int i = 200; i < 200 + 290; ++i) t[i] = kImageId;
  ImageExtent cat{200, 290, {}};
  ImageExtent dog = cat;
  cat.key.fill(1);
  dog.key.fill(2);
  const BlockHash seed = HashSeed("m", "");
  const std::vector<BlockHash> a = BlockHashes(seed, t, std::vector<ImageExtent>{cat});
  const std::vector<BlockHash> b = BlockHashes(seed, t, std::vector<ImageExtent>{dog});
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0], b[0]);  // text only: shared
  for (size_t k = 1; k < a.size(); ++k) EXPECT_NE(a[k], b[k]) << "block " << k;
  // The same picture shares every block, and text-only blocks hash exactly as without images.
  EXPECT_EQ(BlockHashes(seed, t, std::vector<ImageExtent>{cat}), a);
  EXPECT_EQ(a[0], BlockHashes(seed, t)[0]);
  EXPECT_NE(a[1], BlockHashes(seed, t)[1]);
  // The same picture one position later is another prompt from the image's first block on.
  ImageExtent moved = cat;
  moved.start = 201;
  EXPECT_NE(BlockHashes(seed, t, std::vector<ImageExtent>{moved})[1], a[1]);
  // Two adjacent pictures split differently over the same placeholder run differ.
  ImageExtent left{200, 100, {}}, right{300, 190, {}};
  left.key.fill(1);
  right.key.fill(1);
  ImageExtent left2{200, 101, left.key}, right2{301, 189, right.key};
  EXPECT_NE(BlockHashes(seed, t, std::vector<ImageExtent>{left, right})[2],
            BlockHashes(seed, t, std::vector<ImageExtent>{left2, right2})[2]);
}

}  // namespace
}  // namespace flashserve::kv
