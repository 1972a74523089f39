// SharedBytes (base/shared_bytes.h): owned strings, borrowed memory kept alive, slices.
#include "base/shared_bytes.h"

#include <gtest/gtest.h>

#include <string>

namespace flashserve::base {
namespace {

TEST(SharedBytesTest, TakesAStringWithoutCopyingIt) {
  std::string s(100000, 'q');
  const char* data = s.data();
  SharedBytes b = MakeSharedBytes(std::move(s));
  EXPECT_EQ(b->data(), data) << "the string's buffer was moved, not copied";
  EXPECT_EQ(b->size(), 100000u);
  EXPECT_EQ(MakeSharedBytes("")->size(), 0u);
}

TEST(SharedBytesTest, BorrowedMemoryLivesAsLongAsAnyView) {
  bool freed = false;
  std::shared_ptr<char> memory(new char[16]{'a', 'b', 'c', 'd'}, [&freed](char* p) {
    freed = true;
    delete[] p;
  });
  SharedBytes whole = ShareBytes(memory, std::string_view(memory.get(), 4));
  memory.reset();
  SharedBytes slice = SliceBytes(whole, 1, 2);
  whole.reset();
  EXPECT_FALSE(freed);
  EXPECT_EQ(*slice, "bc");
  slice.reset();
  EXPECT_TRUE(freed);
}

TEST(SharedBytesTest, SlicesAreClampedToTheBytes) {
  SharedBytes b = MakeSharedBytes("hello");
  EXPECT_EQ(*SliceBytes(b, 3, 100), "lo");
  EXPECT_EQ(*SliceBytes(b, 9, 2), "");
  EXPECT_EQ(*SliceBytes(b, 0, 5), "hello");
}

}  // namespace
}  // namespace flashserve::base
