#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace flashserve::base {
namespace {

TEST(HugePageBufferTest, CopiesTheBytesOntoA2MiBBoundary) {
  std::vector<uint8_t> src(5 * 1024 * 1024 + 17);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 11));
  auto buf = HugePageBuffer::CopyOf(src.data(), src.size());
  ASSERT_TRUE(buf.ok()) << buf.error().ToString();
  ASSERT_NE(buf->data(), nullptr);
  EXPECT_EQ(buf->size(), src.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % (2 << 20), 0u);
  EXPECT_EQ(0, std::memcmp(buf->data(), src.data(), src.size()));
  // The mapping is found in /proc/self/smaps; how much of it is huge is the kernel's choice.
  const int64_t huge = buf->HugeBytes();
  EXPECT_GE(huge, 0);
  EXPECT_LE(huge, 6 << 20);
  if (!TransparentHugePagesAvailable()) {
    EXPECT_EQ(huge, 0);
  }
}

TEST(HugePageBufferTest, MovesOwnershipAndHandlesEmpty) {
  std::vector<uint8_t> src(100, 7);
  auto made = HugePageBuffer::CopyOf(src.data(), src.size());
  ASSERT_TRUE(made.ok());
  HugePageBuffer a = std::move(made).value();
  const uint8_t* p = a.data();
  HugePageBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[99], 7);
  HugePageBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  auto empty = HugePageBuffer::CopyOf(nullptr, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->HugeBytes(), 0);
}

TEST(HugePageBufferTest, AnImpossibleSizeIsAnErrorNotACrash) {
  const uint8_t byte = 1;
  auto buf = HugePageBuffer::CopyOf(&byte, size_t{1} << 62);  // more than any address space
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.error().code(), ErrorCode::kResourceExhausted);
}

// The kernel's per-mapping counts: a field summed over the mappings of a range, -1 where no
// mapping starts in it or the field does not exist; the machine's available memory.
TEST(MemoryFactsTest, SmapsFieldsAndAvailableMemory) {
  const uint8_t bytes[4096] = {1};
  auto buf = HugePageBuffer::CopyOf(bytes, sizeof bytes);
  ASSERT_TRUE(buf.ok());
  EXPECT_GE(MappedFieldBytes(buf->data(), buf->size(), "Rss"), 4096);  // touched by the copy
  EXPECT_EQ(MappedFieldBytes(buf->data(), buf->size(), "NoSuchField"), -1);
  EXPECT_EQ(MappedFieldBytes(buf->data(), 0, "Rss"), -1);  // an empty range holds no mapping start
  EXPECT_GT(AvailableMemoryBytes(), 0);
}

}  // namespace
}  // namespace flashserve::base
