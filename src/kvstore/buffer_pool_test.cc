// ReadBufferPool (kvstore/buffer_pool.h): alignment, reuse, coalescing, the capacity limit,
// unmapping free slabs, buffers outliving the pool, and concurrent use.
#include "kvstore/buffer_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace flashserve::kvstore {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

uintptr_t Address(const std::shared_ptr<char>& p) { return reinterpret_cast<uintptr_t>(p.get()); }

TEST(ReadBufferPoolTest, BuffersArePageAlignedAndRoundedToPages) {
  ReadBufferPool pool(8 * kMiB, 2 * kMiB);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{538790}}) {
    auto b = pool.Allocate(bytes);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(Address(b) % ReadBufferPool::kPageBytes, 0u) << bytes;
    const size_t pages = bytes == 0 ? 1 : (bytes + 4095) / 4096;
    EXPECT_EQ(pool.stats().used_bytes, static_cast<int64_t>(pages * 4096)) << bytes;
    std::memset(b.get(), 0x5a, pages * 4096);  // the whole rounded size is writable
  }
  EXPECT_EQ(pool.stats().used_bytes, 0);
  EXPECT_EQ(pool.stats().heap_allocations, 0);
}

TEST(ReadBufferPoolTest, SlabsAreHugePageAligned) {
  ReadBufferPool pool(8 * kMiB, 2 * kMiB);
  auto b = pool.Allocate(4096);
  EXPECT_EQ(Address(b) % (2 * kMiB), 0u) << "the first buffer starts its slab";
}

TEST(ReadBufferPoolTest, FreedMemoryIsReusedAndNeighboursCoalesce) {
  ReadBufferPool pool(2 * kMiB, 2 * kMiB);  // one slab
  auto a = pool.Allocate(512 * 1024), b = pool.Allocate(512 * 1024), c = pool.Allocate(512 * 1024);
  ASSERT_TRUE(a && b && c);
  const uintptr_t a_at = Address(a), b_at = Address(b);
  b.reset();
  auto again = pool.Allocate(512 * 1024);
  EXPECT_EQ(Address(again), b_at) << "a freed run is taken again (no page faults on reuse)";
  again.reset();
  a.reset();
  // a and b merged into one 1 MiB run; the slab's last 512 KiB is free too, but not adjacent.
  auto big = pool.Allocate(1024 * 1024);
  EXPECT_EQ(Address(big), a_at);
  EXPECT_EQ(pool.stats().slabs, 1);
  EXPECT_EQ(pool.stats().heap_allocations, 0);
}

TEST(ReadBufferPoolTest, BeyondCapacityBuffersComeFromTheHeap) {
  ReadBufferPool pool(2 * kMiB, 2 * kMiB);
  auto a = pool.Allocate(2 * kMiB);
  ASSERT_NE(a, nullptr);
  auto b = pool.Allocate(4096);  // the one slab is taken and no second one fits the capacity
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Address(b) % 4096, 0u);
  auto c = pool.Allocate(3 * kMiB);  // larger than a slab
  ASSERT_NE(c, nullptr);
  std::memset(c.get(), 1, 3 * kMiB);
  EXPECT_EQ(pool.stats().heap_allocations, 2);
  EXPECT_EQ(pool.stats().mapped_bytes, static_cast<int64_t>(2 * kMiB));
  ReadBufferPool none(0);
  auto d = none.Allocate(100);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(none.stats().slabs, 0);
  EXPECT_EQ(none.stats().heap_allocations, 1);
}

// Bytes of [p, p + n) resident in memory (mincore).
size_t ResidentBytes(uintptr_t p, size_t n) {
  std::vector<unsigned char> pages(n / 4096);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(p), n, pages.data()), 0);
  size_t resident = 0;
  for (unsigned char page : pages) resident += (page & 1) ? 4096 : 0;
  return resident;
}

TEST(ReadBufferPoolTest, FreeMemoryBeyondRetainGoesBackToTheKernel) {
  ReadBufferPool pool(8 * kMiB, 2 * kMiB, /*retain=*/2 * kMiB);
  std::vector<std::shared_ptr<char>> held;
  std::vector<uintptr_t> at;
  for (int i = 0; i < 4; ++i) {
    held.push_back(pool.Allocate(2 * kMiB));
    std::memset(held.back().get(), 1, 2 * kMiB);
    at.push_back(Address(held.back()));
  }
  EXPECT_EQ(pool.stats().slabs, 4);
  held.clear();
  EXPECT_EQ(pool.stats().used_bytes, 0);
  EXPECT_EQ(pool.stats().warm_free_bytes, static_cast<int64_t>(2 * kMiB)) << "the first freed run stays warm";
  size_t resident = 0;
  for (uintptr_t p : at) resident += ResidentBytes(p, 2 * kMiB);
  EXPECT_EQ(resident, 2 * kMiB) << "runs freed beyond the retained 2 MiB were returned";
  // The warm run is taken first: reusing it faults nothing in.
  auto again = pool.Allocate(2 * kMiB);
  EXPECT_EQ(ResidentBytes(Address(again), 2 * kMiB), 2 * kMiB);
  EXPECT_EQ(again.get()[12345], 1) << "the warm run kept its pages";
  EXPECT_EQ(pool.stats().slabs, 4) << "slabs stay mapped; only their pages go back";
}

TEST(ReadBufferPoolTest, ABufferOutlivesItsPool) {
  std::shared_ptr<char> kept;
  {
    ReadBufferPool pool(4 * kMiB, 2 * kMiB);
    kept = pool.Allocate(100000);
    std::memset(kept.get(), 7, 100000);
  }
  EXPECT_EQ(kept.get()[99999], 7);  // still mapped; freed (and unmapped) on release
  kept.reset();
}

TEST(ReadBufferPoolTest, ConcurrentAllocationsNeverOverlap) {
  ReadBufferPool pool(16 * kMiB, 4 * kMiB);
  std::vector<std::thread> threads;
  std::atomic<int> corrupt{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<std::shared_ptr<char>, size_t>> held;
      for (int i = 0; i < 2000; ++i) {
        const size_t bytes = 4096 * (1 + (i * 7 + t * 13) % 50);
        auto b = pool.Allocate(bytes);
        std::memset(b.get(), t * 31 + i % 31, bytes);
        held.emplace_back(std::move(b), bytes);
        if (held.size() > 8) {
          const auto& [buf, n] = held.front();
          const char want = buf.get()[0];
          for (size_t k = 0; k < n; k += 512) corrupt += buf.get()[k] != want ? 1 : 0;
          held.erase(held.begin());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(corrupt.load(), 0);
  EXPECT_EQ(pool.stats().used_bytes, 0);
}

}  // namespace
}  // namespace flashserve::kvstore
