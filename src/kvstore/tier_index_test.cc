// TierIndex ordering (expired first, then least valuable, pinned never) and the TTL class table.
#include "kvstore/tier_index.h"

#include <gtest/gtest.h>

#include <atomic>

#include "base/clock.h"
#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::Key;

IndexEntry Entry(int64_t bytes, int64_t expiry, int64_t last_use, int64_t hits = 0, uint8_t cls = 0) {
  IndexEntry e;
  e.bytes = bytes;
  e.expiry = expiry;
  e.last_use = last_use;
  e.hits = hits;
  e.ttl_class = cls;
  return e;
}

ObjectKey Victim(const TierIndex& index, int64_t now) {
  ObjectKey v;
  EXPECT_TRUE(index.PickVictim(now, nullptr, &v));
  return v;
}

TEST(TierIndexTest, ExpiredFirstThenLeastValuableNeverPinned) {
  TierIndex index;
  index.Insert(Key(1), Entry(10, 500, 100));          // oldest use, unexpired
  index.Insert(Key(2), Entry(10, 300, 400));          // expires at 300
  index.Insert(Key(3), Entry(10, 200, 450));          // expires at 200 (earliest)
  index.Insert(Key(4), Entry(10, 900, 50, /*hits=*/3));  // older than 1, but 3 hits = 1800 s credit
  EXPECT_EQ(index.bytes(), 40);
  EXPECT_EQ(Victim(index, 250), Key(3));  // expired
  EXPECT_EQ(Victim(index, 350), Key(3));  // both expired: earliest expiry first
  EXPECT_EQ(Victim(index, 150), Key(1));  // nothing expired: least valuable
  index.AddPins(Key(1), 1);
  EXPECT_EQ(index.pinned(), 1);
  EXPECT_EQ(Victim(index, 150), Key(2));  // next least recently used
  index.AddPins(Key(3), 1);
  index.AddPins(Key(2), 1);
  EXPECT_EQ(Victim(index, 150), Key(4));
  index.AddPins(Key(4), 1);
  ObjectKey v;
  EXPECT_FALSE(index.PickVictim(150, nullptr, &v));   // everything pinned
  EXPECT_FALSE(index.PickVictim(1000, nullptr, &v));  // even when expired
  index.AddPins(Key(2), -1);
  EXPECT_EQ(Victim(index, 1000), Key(2));
  EXPECT_EQ(index.pinned(), 3);
}

TEST(TierIndexTest, TouchRaisesValueAndSkipExcludes) {
  TierIndex index;
  index.Insert(Key(1), Entry(10, 1000, 100));
  index.Insert(Key(2), Entry(10, 1000, 200));
  EXPECT_EQ(Victim(index, 0), Key(1));
  index.Touch(Key(1), 300, 1);
  EXPECT_EQ(Victim(index, 0), Key(2));
  ObjectKey v;
  ASSERT_TRUE(index.PickVictim(0, [](const ObjectKey& k) { return k == Key(2); }, &v));
  EXPECT_EQ(v, Key(1));
  EXPECT_EQ(TierIndex::Value(*index.Find(Key(1))), 300 + TierIndex::kHitCreditSeconds);
  IndexEntry many = Entry(1, 1, 0, 1000);
  EXPECT_EQ(TierIndex::Value(many), TierIndex::kHitCreditSeconds * TierIndex::kMaxCreditedHits);
}

TEST(TierIndexTest, ExpiredListCountsAndClasses) {
  TierIndex index;
  for (int i = 0; i < 10; ++i) index.Insert(Key(i), Entry(100, 100 + i, 0, 0, static_cast<uint8_t>(i % 2)));
  EXPECT_EQ(index.CountExpired(99), 0);
  EXPECT_EQ(index.CountExpired(104), 5);  // expiries 100..104
  auto expired = index.Expired(104, 3, nullptr);
  ASSERT_EQ(expired.size(), 3u);
  EXPECT_EQ(expired[0], Key(0));
  EXPECT_EQ(expired[2], Key(2));
  index.AddPins(Key(0), 1);
  EXPECT_EQ(index.Expired(104, 100, nullptr).size(), 4u);  // pinned ones are not collected
  EXPECT_EQ(index.class_objects(0), 5);
  EXPECT_EQ(index.class_bytes(1), 500);
  index.Insert(Key(1), Entry(300, 200, 0, 0, kOtherClass));  // replace keeps counts exact
  EXPECT_EQ(index.class_bytes(1), 400);
  EXPECT_EQ(index.class_bytes(kOtherClass), 300);
  EXPECT_EQ(index.bytes(), 1200);
  IndexEntry erased;
  EXPECT_TRUE(index.Erase(Key(1), &erased));
  EXPECT_EQ(erased.bytes, 300);
  EXPECT_FALSE(index.Erase(Key(1)));
  index.SetExpiry(Key(2), 50);
  EXPECT_EQ(index.Expired(60, 10, nullptr).front(), Key(2));
  EXPECT_EQ(index.Keys().size(), 9u);
  index.Clear();
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.bytes(), 0);
  EXPECT_EQ(index.class_objects(0), 0);
}

TEST(ClassTableTest, IdsAndUnknownNames) {
  ClassTable table(DefaultTtlClasses());
  EXPECT_EQ(table.Id("agent"), 0);
  EXPECT_EQ(table.Id("chat"), 1);
  EXPECT_EQ(table.Id("batch"), kOtherClass);
}

}  // namespace
}  // namespace flashserve::kvstore
