// The shared test helpers fail where they must: a comparison that cannot be made (sizes, NaN,
// zero rows) never passes a threshold.
#include <gtest/gtest.h>

#include <limits>

#include "engine/test_model.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;
using testing::MinRowCosine;

TEST(TestHelpersTest, MinRowCosineIsTheWorstRow) {
  const std::vector<float> a = {1, 0, 0, 1, 1, 0};
  const std::vector<float> b = {1, 0, 0, 1, 0, 1};
  EXPECT_DOUBLE_EQ(MinRowCosine(a, a, 3), 1.0);
  EXPECT_NEAR(MinRowCosine(a, b, 3), 0.5, 1e-12);  // row 1: (1,1,0) . (1,0,1) / (sqrt 2 sqrt 2)
}

TEST(TestHelpersTest, MinRowCosineFailsOnWhatItCannotCompare) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<float> ok = {1, 2, 3, 4};
  auto fails = [](double cos) { return !(cos > -1.0); };
  EXPECT_TRUE(fails(MinRowCosine(ok, {1, 2, 3}, 2)));            // sizes differ
  EXPECT_TRUE(fails(MinRowCosine({1, 2, 3}, {1, 2, 3}, 2)));     // not whole rows
  EXPECT_TRUE(fails(MinRowCosine({}, {}, 2)));                   // nothing to compare
  EXPECT_TRUE(fails(MinRowCosine(ok, {1, 2, static_cast<float>(nan), 4}, 2)));  // NaN
  EXPECT_TRUE(fails(MinRowCosine(ok, {1, 2, std::numeric_limits<float>::infinity(), 4}, 2)));
  EXPECT_TRUE(fails(MinRowCosine(ok, {1, 2, 0, 0}, 2)));         // a row of zeros
  EXPECT_TRUE(fails(MinRowCosine({0, 0, 0, 0}, {0, 0, 0, 0}, 2)));
  EXPECT_TRUE(fails(MinRowCosine(ok, ok, 0)));
}

TEST(TestHelpersTest, BitEqualComparesSizesAndBits) {
  EXPECT_TRUE(BitEqual({1, 2}, {1, 2}));
  EXPECT_FALSE(BitEqual({1, 2}, {1, 2, 3}));
  EXPECT_FALSE(BitEqual({0.0f}, {-0.0f}));  // equal as numbers, not as bits
}

}  // namespace
}  // namespace flashserve::engine
