// base::AlignedVector: storage on a cache line at every size, after growth, copies and moves,
// and in thread_local buffers.
#include "base/aligned_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace flashserve::base {
namespace {

bool OnCacheLine(const void* p) { return reinterpret_cast<uintptr_t>(p) % kCacheLineBytes == 0; }

// Sizes around malloc's thresholds: small bins, and the large blocks it maps, which start 16
// bytes past a page (what the engine's activations got from std::vector<float>).
TEST(AlignedVectorTest, StorageStartsOnACacheLineAtEverySize) {
  for (size_t n : {1u, 3u, 16u, 17u, 1000u, 32768u, 33000u, 1u << 20, (1u << 22) + 5}) {
    AlignedVector<float> v(n, 1.5f);
    EXPECT_TRUE(OnCacheLine(v.data())) << n;
    EXPECT_EQ(v[n - 1], 1.5f);
  }
}

TEST(AlignedVectorTest, StaysAlignedWhenItGrowsCopiesAndMoves) {
  AlignedVector<uint32_t> v;
  std::vector<uintptr_t> seen;
  for (uint32_t i = 0; i < 100000; ++i) {
    v.push_back(i);
    if (seen.empty() || seen.back() != reinterpret_cast<uintptr_t>(v.data())) {
      seen.push_back(reinterpret_cast<uintptr_t>(v.data()));
      EXPECT_TRUE(OnCacheLine(v.data())) << v.size();
    }
  }
  EXPECT_GT(seen.size(), 5u);  // it did reallocate
  AlignedVector<uint32_t> copy = v;
  EXPECT_TRUE(OnCacheLine(copy.data()));
  EXPECT_EQ(copy[99999], 99999u);
  AlignedVector<uint32_t> moved = std::move(copy);
  EXPECT_TRUE(OnCacheLine(moved.data()));
  v.resize(7);
  v.shrink_to_fit();
  EXPECT_TRUE(OnCacheLine(v.data()));
}

// The kernels keep per-thread scratch in thread_local AlignedVectors.
TEST(AlignedVectorTest, ThreadLocalBuffersAreAligned) {
  const auto grow = [] {
    thread_local AlignedVector<float> scratch;
    scratch.resize(scratch.size() + 40000);
    return OnCacheLine(scratch.data());
  };
  bool worker_ok = false;
  std::thread t([&] { worker_ok = grow() && grow(); });
  t.join();
  EXPECT_TRUE(worker_ok);
  EXPECT_TRUE(grow());
}

}  // namespace
}  // namespace flashserve::base
