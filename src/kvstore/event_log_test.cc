// KV events: the numbered stored/removed stream the router follows, its gap rule, and
// snapshots that agree with the events.
#include "kvstore/event_log.h"

#include <gtest/gtest.h>

#include <set>

#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::BaseConfig;
using testing::FakeClock;
using testing::Key;
using testing::MakePayload;
using testing::TempDir;

TEST(EventLogTest, NumbersEventsAndReportsGaps) {
  EventLog log(3, "e1");
  EXPECT_EQ(log.last_seq(), 0u);
  protocol::KvEventPage empty = log.Since(0, 10);
  EXPECT_FALSE(empty.gap);
  EXPECT_TRUE(empty.events.empty());
  for (int i = 1; i <= 5; ++i) log.Append(Tier::kMemory, Key(i), i % 2 == 1, 100 + i);
  EXPECT_EQ(log.last_seq(), 5u);
  protocol::KvEventPage page = log.Since(2, 10);  // ring holds 3..5
  ASSERT_FALSE(page.gap);
  ASSERT_EQ(page.events.size(), 3u);
  EXPECT_EQ(page.events[0].seq, 3u);
  EXPECT_TRUE(page.events[0].stored);
  EXPECT_EQ(page.events[0].object.expiry_unix, 103);
  EXPECT_FALSE(page.events[1].stored);
  EXPECT_EQ(page.events[1].object.expiry_unix, 0);
  EXPECT_EQ(page.events[2].object.hash, Key(5).hash);
  EXPECT_EQ(log.Since(4, 1).events.size(), 1u);         // max respected
  EXPECT_TRUE(log.Since(5, 10).events.empty());         // up to date
  EXPECT_TRUE(log.Since(1, 10).gap);                    // event 2 was dropped
  EXPECT_TRUE(log.Since(9, 10).gap);                    // ahead: another epoch's numbers
  EXPECT_EQ(log.Since(1, 10).epoch, "e1");
  EXPECT_NE(NewEpoch(), NewEpoch());
}

// Replays the store's events into a set and checks it against the store's snapshot.
std::set<std::pair<int, ObjectKey>> Replay(const KvStore& store, uint64_t* seq) {
  std::set<std::pair<int, ObjectKey>> held;
  protocol::KvEventPage page = store.Events(0, 1 << 20);
  EXPECT_FALSE(page.gap);
  for (const protocol::KvEvent& e : page.events) {
    ObjectKey key{static_cast<ObjectKind>(e.object.kind), e.object.hash};
    if (e.stored) held.insert({static_cast<int>(e.object.tier), key});
    else held.erase({static_cast<int>(e.object.tier), key});
    *seq = e.seq;
  }
  return held;
}

std::set<std::pair<int, ObjectKey>> FromSnapshot(const protocol::KvSnapshot& s) {
  std::set<std::pair<int, ObjectKey>> held;
  for (const protocol::KvObject& o : s.objects)
    held.insert({static_cast<int>(o.tier), ObjectKey{static_cast<ObjectKind>(o.kind), o.hash}});
  return held;
}

TEST(KvStoreEventsTest, PutsEvictionsAndExpiryAppearAsEventsMatchingTheSnapshot) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.memory_bytes = 3 * static_cast<int64_t>(MakePayload(1)->size()) + 100;  // L1 holds 3
  auto opened = KvStore::Open(config, clock);
  ASSERT_TRUE(opened.ok());
  KvStore& store = **opened;
  for (int i = 1; i <= 5; ++i) store.Put(Key(i), MakePayload(i), 128, "");
  store.Put(Key(5, ObjectKind::kBoundary), MakePayload(6), 640, "agent");
  store.Flush();
  uint64_t seq = 0;
  auto held = Replay(store, &seq);
  // L1 kept the last 3 objects (capacity eviction), L2 holds all 6.
  int in_memory = 0, on_disk = 0;
  for (const auto& [tier, key] : held) (tier == 0 ? in_memory : on_disk)++;
  EXPECT_EQ(in_memory, 3);
  EXPECT_EQ(on_disk, 6);
  EXPECT_TRUE(held.count({1, Key(5, ObjectKind::kBoundary)}));
  EXPECT_FALSE(held.count({0, Key(1)}));  // evicted from L1: a removed event followed its stored event
  protocol::KvSnapshot snapshot = store.Snapshot();
  EXPECT_EQ(snapshot.seq, seq);
  EXPECT_EQ(FromSnapshot(snapshot), held);

  // Expiry: after the agent TTL (3 days) GC removes the boundary object everywhere.
  clock.Advance(3 * 86400 + 1);
  EXPECT_GT(store.CollectGarbage(), 0);
  held = Replay(store, &seq);
  EXPECT_FALSE(held.count({1, Key(5, ObjectKind::kBoundary)}));
  EXPECT_TRUE(held.count({1, Key(1)}));  // chat class: 7 days
  EXPECT_EQ(FromSnapshot(store.Snapshot()), held);
}

TEST(KvStoreEventsTest, ARestartStartsANewEpochAndAnnouncesWhatTheScanFound) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  std::string first_epoch;
  {
    auto store = KvStore::Open(config, clock);
    ASSERT_TRUE(store.ok());
    (*store)->Put(Key(1), MakePayload(1), 128, "");
    (*store)->Flush();
    first_epoch = (*store)->Snapshot().epoch;
  }
  auto store = KvStore::Open(config, clock);
  ASSERT_TRUE(store.ok());
  protocol::KvSnapshot s = (*store)->Snapshot();
  EXPECT_NE(s.epoch, first_epoch);
  ASSERT_EQ(s.objects.size(), 1u);
  EXPECT_EQ(s.objects[0].tier, protocol::KvTier::kDisk);
  uint64_t seq = 0;
  EXPECT_EQ(Replay(**store, &seq), FromSnapshot(s));
}

}  // namespace
}  // namespace flashserve::kvstore
