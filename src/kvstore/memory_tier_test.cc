// L1 on its own (kvstore/memory_tier.h): budget, eviction order, pins, expiry, counters, and
// the StoreTier view it shares with the disk tiers.
#include "kvstore/memory_tier.h"

#include <gtest/gtest.h>

#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::FakeClock;
using testing::Key;
using testing::MakePayload;

TEST(MemoryTierTest, EvictsTheLeastValuableUnpinnedObjectToFit) {
  FakeClock clock(1000000);
  MemoryTier tier(3000, clock);
  ASSERT_TRUE(tier.Insert(Key(1), MakePayload(1), 128, clock.NowUnixSeconds() + 100, 0, /*pin=*/true));
  ASSERT_TRUE(tier.Insert(Key(2), MakePayload(2), 128, clock.NowUnixSeconds() + 100, 0, false));
  clock.Advance(1);
  ASSERT_TRUE(tier.Insert(Key(3), MakePayload(3), 128, clock.NowUnixSeconds() + 100, 0, false));
  clock.Advance(1);
  ASSERT_TRUE(tier.Insert(Key(4), MakePayload(4), 128, clock.NowUnixSeconds() + 100, 0, false));
  EXPECT_FALSE(tier.Holds(Key(2), clock.NowUnixSeconds()));  // oldest unpinned
  EXPECT_TRUE(tier.Holds(Key(1), clock.NowUnixSeconds()));   // pinned, though older
  EXPECT_EQ(tier.Stats().evictions, 1);
  EXPECT_EQ(tier.Stats().pinned, 1);
  EXPECT_FALSE(tier.Insert(Key(5), MakePayload(5, 4000), 128, clock.NowUnixSeconds() + 100, 0, false));  // too big
  tier.Unpin(Key(1));
  EXPECT_EQ(tier.Stats().pinned, 0);
  EXPECT_EQ(tier.Stats().capacity, 3000);
  EXPECT_EQ(tier.Stats().bytes, 3000);
}

TEST(MemoryTierTest, GetCountsHitsAndMissesAndNeverReturnsExpired) {
  FakeClock clock(1000000);
  MemoryTier tier(1 << 20, clock);
  ASSERT_TRUE(tier.Insert(Key(1), MakePayload(1), 128, clock.NowUnixSeconds() + 10, 0, false));
  ASSERT_NE(tier.Get(Key(1), true), nullptr);
  EXPECT_EQ(*tier.Get(Key(1), true), *MakePayload(1));
  EXPECT_EQ(tier.Get(Key(2), true), nullptr);
  EXPECT_EQ(tier.Get(Key(3), /*count_miss=*/false), nullptr);
  EXPECT_EQ(tier.Stats().hits, 2);
  EXPECT_EQ(tier.Stats().misses, 1);
  clock.Advance(10);
  EXPECT_EQ(tier.Get(Key(1), true), nullptr);
  EXPECT_FALSE(tier.FindAndTouch(Key(1), false));
  EXPECT_EQ(tier.Stats().gc_backlog, 1);
  RateLimiter unused(1);
  EXPECT_EQ(tier.CollectExpired(unused, nullptr), 1);
  EXPECT_EQ(tier.Stats().objects, 0);
  EXPECT_EQ(tier.Stats().expirations, 1);
}

TEST(MemoryTierTest, AHeldKeyKeepsItsPayloadAndTakesTheLaterExpiry) {
  FakeClock clock(1000000);
  MemoryTier tier(1 << 20, clock);
  std::vector<std::pair<ObjectKey, bool>> events;
  tier.SetObserver([&](const ObjectKey& key, bool stored, int64_t) { events.push_back({key, stored}); });
  const int64_t now = clock.NowUnixSeconds();
  ASSERT_TRUE(tier.Insert(Key(1), MakePayload(1), 128, now + 10, 0, false));
  ASSERT_TRUE(tier.Insert(Key(1), MakePayload(9), 128, now + 50, 0, /*pin=*/true));
  EXPECT_EQ(*tier.Get(Key(1), true), *MakePayload(1));
  EXPECT_TRUE(tier.Holds(Key(1), now + 20));
  EXPECT_EQ(tier.Stats().pinned, 1);
  EXPECT_TRUE(tier.Pin(Key(1)));
  EXPECT_FALSE(tier.Pin(Key(2)));
  std::vector<ObjectKey> seen;
  tier.ForEachObject(now, [&](const ObjectKey& key, int64_t expiry) {
    seen.push_back(key);
    EXPECT_EQ(expiry, now + 50);
  });
  EXPECT_EQ(seen, std::vector<ObjectKey>{Key(1)});
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front(), std::make_pair(Key(1), true));
  EXPECT_EQ(tier.tier(), Tier::kMemory);
}

}  // namespace
}  // namespace flashserve::kvstore
