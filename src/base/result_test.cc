#include "base/result.h"

#include <gtest/gtest.h>

#include <memory>

namespace flashserve::base {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Error(ErrorCode::kInvalidArgument, "odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  FS_ASSIGN_OR_RETURN(int h, Half(x));
  FS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckPositive(int x) {
  if (x <= 0) return Error(ErrorCode::kOutOfRange, "not positive");
  return Status::Ok();
}

Status Both(int x) {
  FS_RETURN_IF_ERROR(CheckPositive(x));
  FS_RETURN_IF_ERROR(Half(x));
  return Status::Ok();
}

TEST(ResultTest, PropagatesValuesAndErrors) {
  EXPECT_EQ(Quarter(12).value(), 3);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "odd: 3");
  EXPECT_TRUE(Both(4).ok());
  EXPECT_EQ(Both(-2).error().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(Both(3).error().code(), ErrorCode::kInvalidArgument);
}

TEST(ResultTest, MoveOnlyValuesAndContext) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
  Error e = Error(ErrorCode::kNotFound, "tensor x").WithContext("shard 2");
  EXPECT_EQ(e.message(), "shard 2: tensor x");
  EXPECT_EQ(e.ToString(), "not found: shard 2: tensor x");
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  EXPECT_DEATH(
      {
        Result<int> r(Error(ErrorCode::kInternal, "boom"));
        (void)r.value();
      },
      "boom");
}

}  // namespace
}  // namespace flashserve::base
