// The vision tower's batches: pictures of different grids encoded together give, bit for bit,
// the rows each gives alone (their linear products share the weights, attention stays within a
// picture); one bad picture fails the batch with a clear error; an empty batch is empty.
#include <gtest/gtest.h>

#include "engine/test_image_prompt.h"

namespace flashserve::engine {
namespace {

TEST(VisionTowerBatch, PicturesTogetherGiveTheirRowsAlone) {
  const Model& m = testing::VisionModel();
  base::ThreadPool pool(2);
  VisionTower tower(m, pool);
  const std::vector<std::pair<int, int>> grids = {{7, 11}, {14, 23}, {5, 3}};
  std::vector<std::vector<float>> patches;
  std::vector<PicturePatches> batch;
  for (size_t i = 0; i < grids.size(); ++i)
    patches.push_back(testing::RandomPatches(m, grids[i].first, grids[i].second, static_cast<uint32_t>(10 + i)));
  for (size_t i = 0; i < grids.size(); ++i) batch.push_back({patches[i], grids[i].first, grids[i].second});
  auto together = tower.EncodeBatch(batch);
  ASSERT_TRUE(together.ok()) << together.error().ToString();
  ASSERT_EQ(together->size(), grids.size());
  for (size_t i = 0; i < grids.size(); ++i) {
    auto alone = tower.Encode(patches[i], grids[i].first, grids[i].second);
    ASSERT_TRUE(alone.ok());
    const int cells = ((grids[i].first + 2) / 3) * ((grids[i].second + 2) / 3);
    EXPECT_EQ((*together)[i].size(), static_cast<size_t>(cells * m.config().hidden_size));
    EXPECT_TRUE(testing::BitEqual((*together)[i], *alone)) << "picture " << i;
  }
  batch[1].vit_w = 22;  // its patches no longer fill the grid
  auto bad = tower.EncodeBatch(batch);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("patch values for a 14x22 grid"), std::string::npos) << bad.error().message();
  auto none = tower.EncodeBatch({});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace flashserve::engine
