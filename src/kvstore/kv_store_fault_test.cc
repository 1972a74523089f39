// KvStore under faults: corrupt, truncated and foreign objects, a full disk, read errors, a full
// write backlog, stale temporary files, bad directories, and concurrent readers and writers.
#include <gtest/gtest.h>
#include <sys/time.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::BaseConfig;
using testing::FakeClock;
using testing::FaultFileSystem;
using testing::Key;
using testing::kFingerprint;
using testing::MakePayload;
using testing::TempDir;
using testing::WaitFor;

// The tests' base configuration, with every file operation going through `fs`.
StoreConfig FaultConfig(const TempDir& dir, FaultFileSystem* fs) {
  StoreConfig config = BaseConfig(dir);
  config.file_system = fs;
  return config;
}

std::unique_ptr<KvStore> OpenOrDie(const StoreConfig& config, const base::Clock& clock) {
  auto store = KvStore::Open(config, clock);
  EXPECT_TRUE(store.ok()) << store.error().ToString();
  return std::move(store).value();
}

std::vector<bool> FetchSync(KvStore& store, std::vector<ObjectKey> keys, bool pin = false) {
  std::promise<std::vector<bool>> promise;
  store.Fetch(std::move(keys), [&](std::vector<bool> present) { promise.set_value(std::move(present)); }, pin);
  return promise.get_future().get();
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// Writes Key(i) for i < n through a store and closes it; returns the paths.
std::vector<std::string> WriteObjects(const StoreConfig& config, const base::Clock& clock, int n) {
  auto store = OpenOrDie(config, clock);
  std::vector<std::string> paths;
  for (int i = 0; i < n; ++i) {
    store->Put(Key(i), MakePayload(i), 128, "");
    paths.push_back(ObjectPath(config.disk_dir, config.fingerprint, Key(i)));
  }
  return paths;
}

TEST(KvStoreFaultTest, CorruptPayloadByteIsAMissDeletedAndCounted) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  auto paths = WriteObjects(config, clock, 2);
  std::string bytes = ReadAll(paths[0]);
  bytes[bytes.size() / 2] ^= 0x10;
  WriteAll(paths[0], bytes);
  auto store = OpenOrDie(config, clock);
  EXPECT_EQ(store->Locate(Key(0)), Tier::kDisk);  // a header-only scan cannot see payload damage
  EXPECT_EQ(FetchSync(*store, {Key(0), Key(1)}), (std::vector<bool>{false, true}));
  EXPECT_EQ(store->GetMemory(Key(0)), nullptr);
  EXPECT_FALSE(Exists(paths[0]));
  EXPECT_FALSE(store->Locate(Key(0)).has_value());
  const TierStats s = store->Stats().tiers[1];
  EXPECT_EQ(s.corrupt, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 1);
}

TEST(KvStoreFaultTest, CorruptHeaderAndTruncatedObjectsAreDeletedAtOpen) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  auto paths = WriteObjects(config, clock, 3);
  std::string bytes = ReadAll(paths[0]);
  bytes[20] ^= 0x01;
  WriteAll(paths[0], bytes);
  bytes = ReadAll(paths[1]);
  WriteAll(paths[1], bytes.substr(0, bytes.size() - 100));
  auto store = OpenOrDie(config, clock);
  EXPECT_FALSE(Exists(paths[0]));
  EXPECT_FALSE(Exists(paths[1]));
  EXPECT_EQ(store->Stats().tiers[1].corrupt, 2);
  EXPECT_EQ(store->Stats().tiers[1].objects, 1);
  EXPECT_EQ(FetchSync(*store, {Key(0), Key(1), Key(2)}), (std::vector<bool>{false, false, true}));
}

TEST(KvStoreFaultTest, ObjectTruncatedWhileOpenIsAMiss) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.memory_bytes = 1500;  // one object: the second Put evicts the first from L1
  auto store = OpenOrDie(config, clock);
  store->Put(Key(0), MakePayload(0), 128, "");
  store->Put(Key(1), MakePayload(1), 128, "");
  store->Flush();
  const std::string path = ObjectPath(config.disk_dir, kFingerprint, Key(0));
  const std::string bytes = ReadAll(path);
  WriteAll(path, bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(FetchSync(*store, {Key(0)}), std::vector<bool>{false});
  EXPECT_FALSE(Exists(path));
  EXPECT_EQ(store->Stats().tiers[1].corrupt, 1);
}

TEST(KvStoreFaultTest, ForeignFingerprintIsNeverServed) {
  TempDir dir;
  FakeClock clock;
  StoreConfig other = BaseConfig(dir);
  other.fingerprint = "aaaa";
  other.shared_dir = dir.Sub("l3");
  other.shared_bytes = 1 << 24;
  auto paths = WriteObjects(other, clock, 2);
  StoreConfig mine = other;
  mine.fingerprint = "bbbb";
  // An object of model aaaa placed where model bbbb looks for it, in L2 and in L3.
  WriteAll(ObjectPath(mine.disk_dir, mine.fingerprint, Key(0)), ReadAll(paths[0]));
  auto store = OpenOrDie(mine, clock);
  EXPECT_EQ(store->Stats().tiers[1].foreign, 1);  // found by the scan
  EXPECT_FALSE(Exists(ObjectPath(mine.disk_dir, mine.fingerprint, Key(0))));
  const std::string shared_copy = ObjectPath(mine.shared_dir, mine.fingerprint, Key(1));
  WriteAll(shared_copy, ReadAll(ObjectPath(other.shared_dir, other.fingerprint, Key(1))));
  EXPECT_EQ(FetchSync(*store, {Key(0), Key(1)}), (std::vector<bool>{false, false}));  // L3 probe
  EXPECT_EQ(store->Stats().tiers[2].foreign, 1);
  EXPECT_FALSE(Exists(shared_copy));
  EXPECT_TRUE(Exists(paths[0]));  // model aaaa's own objects are left alone
  EXPECT_TRUE(Exists(ObjectPath(other.shared_dir, other.fingerprint, Key(1))));
}

TEST(KvStoreFaultTest, DiskFullStopsWritingSaysSoAndKeepsServingReads) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  StoreConfig config = FaultConfig(dir, &fs);
  config.memory_bytes = 2000;  // two objects: older ones are served from disk
  auto store = OpenOrDie(config, clock);
  fs.quota_bytes = 3 * 1200;   // room for three objects (1000 B payload + header)
  for (int i = 0; i < 5; ++i) {
    store->Put(Key(i), MakePayload(i), 128, "");
    store->Flush();
  }
  StoreStats stats = store->Stats();
  EXPECT_EQ(fs.writes.load(), 3);
  EXPECT_FALSE(stats.tiers[1].writable);
  EXPECT_NE(stats.tiers[1].write_disabled_reason.find("No space left"), std::string::npos);
  EXPECT_EQ(stats.tiers[1].write_errors, 1);
  EXPECT_EQ(stats.tiers[1].writes_dropped, 1);  // key 4: not attempted while disabled
  EXPECT_EQ(FetchSync(*store, {Key(0), Key(1), Key(2)}), (std::vector<bool>(3, true)));  // reads continue
  fs.quota_bytes = INT64_MAX;  // space freed, but the back-off has not passed
  store->Put(Key(5), MakePayload(5), 128, "");
  store->Flush();
  EXPECT_EQ(fs.writes.load(), 3);
  clock.Advance(config.write_retry_seconds);
  store->Put(Key(6), MakePayload(6), 128, "");
  store->Flush();
  stats = store->Stats();
  EXPECT_EQ(fs.writes.load(), 4);
  EXPECT_TRUE(stats.tiers[1].writable);
  EXPECT_TRUE(stats.tiers[1].write_disabled_reason.empty());
  EXPECT_TRUE(Exists(ObjectPath(config.disk_dir, kFingerprint, Key(6))));
}

TEST(KvStoreFaultTest, WritesRetryEarlyWhenUsageDrops) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  StoreConfig config = FaultConfig(dir, &fs);
  config.ttl_classes = {{"short", 10}, {"chat", 86400}};
  config.default_ttl_class = "chat";
  config.io_threads = 1;  // writes in Put order: the fifth one fails
  auto store = OpenOrDie(config, clock);
  fs.quota_bytes = 4 * 1200;
  for (int i = 0; i < 4; ++i) store->Put(Key(i), MakePayload(i), 128, "short");
  store->Put(Key(4), MakePayload(4), 128, "");
  store->Flush();
  ASSERT_FALSE(store->Stats().tiers[1].writable);
  clock.Advance(11);  // the short objects expire; GC frees their space well before the back-off ends
  EXPECT_EQ(store->CollectGarbage(), 8);
  fs.quota_bytes = INT64_MAX;
  store->Put(Key(5), MakePayload(5), 128, "");
  store->Flush();
  EXPECT_TRUE(store->Stats().tiers[1].writable);
  EXPECT_TRUE(Exists(ObjectPath(config.disk_dir, kFingerprint, Key(5))));
}

TEST(KvStoreFaultTest, ReadErrorsAreMissesAndKeepTheObject) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  StoreConfig config = FaultConfig(dir, &fs);
  auto paths = WriteObjects(config, clock, 1);
  auto store = OpenOrDie(config, clock);
  fs.fail_reads = true;
  EXPECT_EQ(FetchSync(*store, {Key(0)}), std::vector<bool>{false});
  EXPECT_EQ(store->Stats().tiers[1].read_errors, 1);
  EXPECT_TRUE(Exists(paths[0]));
  fs.fail_reads = false;
  EXPECT_EQ(FetchSync(*store, {Key(0)}), std::vector<bool>{true});
}

TEST(KvStoreFaultTest, FullWriteBacklogDropsWriteThroughs) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  StoreConfig config = FaultConfig(dir, &fs);
  config.io_threads = 1;
  config.max_pending_write_bytes = 1500;
  auto store = OpenOrDie(config, clock);
  fs.block_writes = true;
  store->Put(Key(0), MakePayload(0), 128, "");
  store->Put(Key(1), MakePayload(1), 128, "");  // 2000 pending bytes > 1500: dropped
  EXPECT_EQ(store->Stats().pending_writes, 1);
  fs.block_writes = false;
  store->Flush();
  EXPECT_EQ(store->Stats().tiers[1].writes_dropped, 1);
  EXPECT_EQ(fs.writes.load(), 1);
  EXPECT_NE(store->GetMemory(Key(1)), nullptr);  // still served from memory
}

TEST(KvStoreFaultTest, StaleTemporaryFilesAreRemovedAtOpen) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  const std::string object = ObjectPath(config.disk_dir, kFingerprint, Key(0));
  const std::string stale = object + ".tmp.dead.1", fresh = object + ".tmp.live.2";
  WriteAll(stale, "partial");
  WriteAll(fresh, "partial");
  const timeval old_times[2] = {{clock.NowUnixSeconds() - 7200, 0}, {clock.NowUnixSeconds() - 7200, 0}};
  ASSERT_EQ(::utimes(stale.c_str(), old_times), 0);
  auto store = OpenOrDie(config, clock);
  EXPECT_FALSE(Exists(stale));
  EXPECT_TRUE(Exists(fresh));  // may belong to a live writer
  EXPECT_EQ(store->Stats().tiers[1].objects, 0);
}

TEST(KvStoreFaultTest, ScanDeletesMisplacedObjectsAndIgnoresSymlinks) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  auto paths = WriteObjects(config, clock, 2);
  const std::string name = std::filesystem::path(paths[0]).filename().string();
  const std::string misplaced = config.disk_dir + "/" + kFingerprint + "/00/00/" + name;
  WriteAll(misplaced, ReadAll(paths[0]));
  std::filesystem::remove(paths[0]);
  const std::string outside = dir.Sub("outside.block");
  WriteAll(outside, ReadAll(paths[1]));
  std::filesystem::remove(paths[1]);
  std::filesystem::create_symlink(outside, paths[1]);  // an object path that points out of the root
  auto store = OpenOrDie(config, clock);
  EXPECT_FALSE(Exists(misplaced));
  EXPECT_EQ(store->Stats().tiers[1].corrupt, 1);
  EXPECT_EQ(store->Stats().tiers[1].objects, 0);  // the symlink is not indexed
  EXPECT_EQ(FetchSync(*store, {Key(0), Key(1)}), (std::vector<bool>{false, false}));
  EXPECT_TRUE(Exists(outside));  // never followed, never deleted
}

TEST(KvStoreFaultTest, ObjectLargerThanTheTierIsNotWritten) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.disk_bytes = 500;
  auto store = OpenOrDie(config, clock);
  store->Put(Key(0), MakePayload(0), 128, "");
  store->Flush();
  EXPECT_EQ(store->Stats().tiers[1].writes_dropped, 1);
  EXPECT_FALSE(Exists(ObjectPath(config.disk_dir, kFingerprint, Key(0))));
  EXPECT_NE(store->GetMemory(Key(0)), nullptr);
}

TEST(KvStoreFaultTest, OpenReportsBadConfigAndUnusableDirectories) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.fingerprint = "NOT-HEX";
  EXPECT_EQ(KvStore::Open(config, clock).error().code(), base::ErrorCode::kInvalidArgument);
  WriteAll(dir.Sub("file"), "x");
  config = BaseConfig(dir);
  config.disk_dir = dir.Sub("file/l2");
  auto store = KvStore::Open(config, clock);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message().find("disk tier"), std::string::npos) << store.error().ToString();
}

TEST(KvStoreFaultTest, FetchPinsPredictsAndCloseFlushes) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.memory_bytes = 2000;
  auto paths = WriteObjects(config, clock, 50);  // closed right after the Puts: all flushed
  for (const std::string& p : paths) EXPECT_TRUE(Exists(p)) << p;
  auto store = OpenOrDie(config, clock);
  const double prior = store->PredictFetchSeconds(Tier::kDisk, 1'000'000);
  EXPECT_DOUBLE_EQ(prior, 1e6 / 1e9);
  EXPECT_EQ(store->PredictFetchSeconds(Tier::kMemory, 1'000'000), 0);
  EXPECT_TRUE(std::isinf(store->PredictFetchSeconds(Tier::kShared, 1)));
  EXPECT_EQ(FetchSync(*store, {Key(0)}, /*pin=*/true), std::vector<bool>{true});
  EXPECT_EQ(store->Stats().tiers[0].pinned, 1);
  EXPECT_EQ(FetchSync(*store, {Key(1), Key(2), Key(3)}), (std::vector<bool>(3, true)));
  EXPECT_NE(store->GetMemory(Key(0)), nullptr);  // pinned: survived two later loads into a 2-object L1
  store->Unpin(Key(0));
  EXPECT_EQ(store->Stats().tiers[0].pinned, 0);
  const TierStats disk = store->Stats().tiers[1];
  EXPECT_GT(disk.read_bytes_per_second, 0);
  EXPECT_EQ(disk.bytes_read, 4 * (disk.bytes / 50));
  const double measured = store->PredictFetchSeconds(Tier::kDisk, 1'000'000);
  EXPECT_DOUBLE_EQ(measured, 1e6 / disk.read_bytes_per_second);
  EXPECT_DOUBLE_EQ(store->PredictFetchSeconds(Tier::kDisk, 2'000'000), 2 * measured);
  store->Close();
  EXPECT_EQ(FetchSync(*store, {Key(4)}), std::vector<bool>{false});  // closed: a miss, no I/O
  store->Put(Key(99), MakePayload(99), 128, "");
  EXPECT_FALSE(Exists(ObjectPath(config.disk_dir, kFingerprint, Key(99))));
}

// A Fetch reads an object's file; before it records the hit, new writes evict that object. The
// Fetch still gets the object, and the index does not take it back: the tier stays in budget.
TEST(KvStoreFaultTest, ObjectEvictedWhileBeingReadIsNotIndexedAgain) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem faults;
  StoreConfig config = FaultConfig(dir, &faults);
  config.io_threads = 2;  // one Fetch waits in a read, the other thread writes
  config.disk_bytes = 3 * 1108;  // three 1,000-byte objects with their headers
  OpenOrDie(config, clock)->Put(Key(0), MakePayload(0), 128, "chat");
  {
    auto writer = OpenOrDie(config, clock);
    for (int k = 1; k < 3; ++k) writer->Put(Key(k), MakePayload(k), 128, "chat");
  }
  auto store = OpenOrDie(config, clock);  // L1 empty, L2 indexes keys 0-2
  ASSERT_EQ(store->Stats().tiers[1].objects, 3);
  faults.pause_payload_reads = true;
  auto fetched = std::async(std::launch::async, [&] { return FetchSync(*store, {Key(0)}); });
  while (faults.paused_reads.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int k = 3; k < 6; ++k) store->Put(Key(k), MakePayload(k), 128, "chat");  // evicts keys 0-2 from L2
  // (Flush would wait for the paused read too.) The other I/O thread writes the three objects.
  const double start = base::MonotonicSeconds();
  while ((faults.writes.load() < 6 || store->Stats().pending_writes > 0) && base::MonotonicSeconds() - start < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(faults.writes.load(), 6);
  EXPECT_FALSE(std::filesystem::exists(ObjectPath(config.disk_dir, kFingerprint, Key(0))));
  faults.pause_payload_reads = false;
  EXPECT_EQ(fetched.get(), std::vector<bool>{true});  // served: it was read before the eviction
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[1].objects, 3);
  EXPECT_LE(stats.tiers[1].bytes, config.disk_bytes);
  EXPECT_NE(store->Locate(Key(0)), std::optional<Tier>(Tier::kDisk));
}

TEST(KvStoreFaultTest, ConcurrentReadersAndWriters) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.memory_bytes = 20 * 1000;  // both tiers evict under this load
  config.disk_bytes = 40 * 1200;
  config.io_threads = 3;
  auto store = OpenOrDie(config, clock);
  constexpr int kKeys = 64;
  std::atomic<int> bad{0};
  auto check = [&](int k, const Payload& p) {
    if (p != nullptr && *p != *MakePayload(k)) ++bad;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < 400; ++op) {
        const int k = static_cast<int>(rng() % kKeys);
        switch (rng() % 5) {
          case 0: store->Put(Key(k), MakePayload(k), 128, ""); break;
          case 1: check(k, store->GetMemory(Key(k))); break;
          case 2: {
            const std::vector<bool> present = FetchSync(*store, {Key(k), Key((k + 1) % kKeys)}, /*pin=*/true);
            check(k, store->GetMemory(Key(k)));
            if (present[0]) store->Unpin(Key(k));
            if (present[1]) store->Unpin(Key((k + 1) % kKeys));
            break;
          }
          case 3:
            if (store->Pin(Key(k))) store->Unpin(Key(k));
            break;
          default: (void)store->Locate(Key(k)); (void)store->Stats(); break;
        }
      }
    });
  }
  std::atomic<bool> stop{false};
  std::thread gc([&] {
    while (!stop.load()) {
      clock.Advance(3600);  // objects expire as the test runs
      store->CollectGarbage();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (std::thread& t : threads) t.join();
  stop = true;
  gc.join();
  store->Flush();
  EXPECT_EQ(bad.load(), 0);
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[0].pinned, 0);
  EXPECT_LE(stats.tiers[0].bytes, config.memory_bytes);
  EXPECT_LE(stats.tiers[1].bytes, config.disk_bytes);
  EXPECT_EQ(stats.pending_writes, 0);
  EXPECT_GT(stats.tiers[1].bytes_written, 0);
  for (int k = 0; k < kKeys; ++k) check(k, store->GetMemory(Key(k)));
  EXPECT_EQ(bad.load(), 0);
}

// Worker B over a shared directory that worker A writes, rescanning it every second through fs.
StoreConfig SharedConfig(const TempDir& dir, FaultFileSystem* fs) {
  StoreConfig config = BaseConfig(dir, /*with_disk=*/false);
  config.shared_dir = dir.Sub("shared");
  config.shared_bytes = 1 << 24;
  if (fs != nullptr) {
    config.file_system = fs;
    config.background_gc = true;
    config.gc_delay_seconds = 1;
    config.shared_rescan_seconds = 1;
  }
  return config;
}

// A rescan of the shared tier that cannot list its directory (an NFS error), or cannot read an
// object's header, keeps the entries it had: a failed listing or read is no deletion.
void ExpectRescanKeepsEntriesThrough(std::atomic<bool> FaultFileSystem::*fault) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  auto store_a = OpenOrDie(SharedConfig(dir, nullptr), clock);
  store_a->Put(Key(1), MakePayload(1), 128, "");
  store_a->Flush();
  auto store_b = OpenOrDie(SharedConfig(dir, &fs), clock);
  ASSERT_EQ(store_b->Locate(Key(1)), Tier::kShared);
  clock.Advance(1);  // the entry is older than the rescans below
  const int64_t scans = store_b->Stats().tiers[2].scans;
  (fs.*fault) = true;
  ASSERT_TRUE(WaitFor([&] { return store_b->Stats().tiers[2].incomplete_scans >= 1; }));
  (fs.*fault) = false;
  EXPECT_GT(store_b->Stats().tiers[2].scans, scans);
  EXPECT_EQ(store_b->Locate(Key(1)), Tier::kShared);
  EXPECT_EQ(store_b->Stats().tiers[2].objects, 1);
  EXPECT_EQ(FetchSync(*store_b, {Key(1)}), std::vector<bool>{true});
}

TEST(KvStoreFaultTest, SharedRescanThatCannotListKeepsItsEntries) {
  ExpectRescanKeepsEntriesThrough(&FaultFileSystem::fail_lists);
}

TEST(KvStoreFaultTest, SharedRescanThatCannotReadAHeaderKeepsItsEntry) {
  ExpectRescanKeepsEntriesThrough(&FaultFileSystem::fail_reads);
}

// Worker B (fs, rescans every second) beside two objects another worker wrote to L3, `early`
// before `late` in the order a rescan reads them (fs lists sorted). B's L3 fits two and a half
// objects and `late` was just used: B's next write evicts `early`.
struct EvictionDuringRescan {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  ObjectKey early = Key(1), late = Key(2);
  std::string early_path;
  int64_t file_bytes = 0;
  std::unique_ptr<KvStore> store_b;

  EvictionDuringRescan() {
    StoreConfig a = SharedConfig(dir, nullptr);
    if (ObjectPath(a.shared_dir, kFingerprint, late) < ObjectPath(a.shared_dir, kFingerprint, early)) {
      std::swap(early, late);
    }
    {
      auto store_a = OpenOrDie(a, clock);
      store_a->Put(early, MakePayload(1), 128, "");
      store_a->Put(late, MakePayload(2), 128, "");
      store_a->Flush();
    }
    early_path = ObjectPath(a.shared_dir, kFingerprint, early);
    file_bytes = static_cast<int64_t>(std::filesystem::file_size(early_path));
    StoreConfig b = SharedConfig(dir, &fs);
    b.shared_bytes = 2 * file_bytes + file_bytes / 2;
    store_b = OpenOrDie(b, clock);
    EXPECT_EQ(store_b->Stats().tiers[2].objects, 2);
    EXPECT_FALSE(store_b->Pin(late));  // not in L1, but a hit in L3: `early` is now the least valuable
  }
  int64_t scans() const { return store_b->Stats().tiers[2].scans; }
  void ExpectEarlyGone() {
    EXPECT_FALSE(Exists(early_path));
    EXPECT_FALSE(store_b->Locate(early).has_value());
    EXPECT_EQ(store_b->Stats().tiers[2].objects, 2);
    EXPECT_EQ(store_b->Stats().tiers[2].bytes, 2 * file_bytes);
  }
};

// An object this worker deletes (here: evicted for a new write) while a rescan is reading the
// directory is not indexed again by that rescan once it has read its header.
TEST(KvStoreFaultTest, ObjectDeletedDuringARescanIsNotIndexedAgain) {
  EvictionDuringRescan t;
  t.fs.pause_open_part = ObjectFileName(t.late);
  t.fs.pause_opens = true;
  ASSERT_TRUE(WaitFor([&] { return t.fs.paused_opens.load() > 0; }));  // a rescan has read `early`'s header
  t.store_b->Put(Key(3), MakePayload(3), 128, "");
  t.store_b->Flush();
  EXPECT_FALSE(Exists(t.early_path));  // evicted
  const int64_t scans = t.scans();
  t.fs.pause_opens = false;
  ASSERT_TRUE(WaitFor([&] { return t.scans() > scans; }));  // that rescan is over
  t.ExpectEarlyGone();
}

// An object this worker started deleting (an eviction whose unlink is slow) before a rescan
// began is not indexed again by that rescan, whether the rescan ends first or the delete does.
TEST(KvStoreFaultTest, ObjectBeingDeletedWhenARescanStartsIsNotIndexedAgain) {
  for (const bool delete_ends_first : {false, true}) {
    SCOPED_TRACE(delete_ends_first ? "the delete ends first" : "the rescan ends first");
    EvictionDuringRescan t;
    t.fs.pause_remove_part = ObjectFileName(t.early);
    t.fs.pause_removes = true;
    t.store_b->Put(Key(3), MakePayload(3), 128, "");
    ASSERT_TRUE(WaitFor([&] { return t.fs.paused_removes.load() > 0; }));  // evicting `early`
    int64_t scans = t.scans();
    ASSERT_TRUE(WaitFor([&] { return t.scans() > scans; }));  // the next rescan begins after the eviction did
    if (delete_ends_first) {
      t.fs.pause_open_part = ObjectFileName(t.late);
      t.fs.pause_opens = true;
      ASSERT_TRUE(WaitFor([&] { return t.fs.paused_opens.load() > 0; }));  // it has read `early`'s header
      scans = t.scans();
      t.fs.pause_removes = false;
      t.store_b->Flush();
      t.fs.pause_opens = false;
    } else {
      scans = t.scans();
    }
    ASSERT_TRUE(WaitFor([&] { return t.scans() > scans; }));  // that rescan is over
    EXPECT_FALSE(t.store_b->Locate(t.early).has_value());
    t.fs.pause_removes = false;
    t.store_b->Flush();
    t.ExpectEarlyGone();
  }
}
// Worker A's GC has judged an object expired and is deleting it when worker B renews it. A
// deletes only the copy it checked (moved aside first): B's renewed file stays in place.
TEST(KvStoreFaultTest, SharedGcNeverDeletesAFileRenewedAfterItsCheck) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  StoreConfig a = SharedConfig(dir, &fs);
  a.ttl_classes = {{"short", 10}};
  a.default_ttl_class = "short";
  a.shared_rescan_seconds = 0;
  StoreConfig b = SharedConfig(dir, nullptr);
  b.ttl_classes = a.ttl_classes;
  b.default_ttl_class = "short";
  auto store_a = OpenOrDie(a, clock);
  store_a->Put(Key(1), MakePayload(1), 128, "");
  store_a->Flush();
  auto store_b = OpenOrDie(b, clock);
  fs.pause_remove_part = ObjectFileName(Key(1));
  fs.pause_removes = true;
  clock.Advance(11);  // expired
  ASSERT_TRUE(WaitFor([&] { return fs.paused_removes.load() > 0; }));  // A checked it and is deleting it
  store_b->Put(Key(1), MakePayload(1), 128, "");                       // B renews it meanwhile
  store_b->Flush();
  fs.pause_removes = false;
  ASSERT_TRUE(WaitFor([&] { return store_a->Stats().tiers[2].expirations == 1; }));
  const ObjectKey key = Key(1);
  const ReadOptions read{&key, kFingerprint, clock.NowUnixSeconds(), /*read_payload=*/true, CacheUse::kKeep};
  const ReadOutcome renewed = ReadObject(*FileSystem::Posix(), ObjectPath(a.shared_dir, kFingerprint, key), read);
  EXPECT_EQ(renewed.verdict, Verdict::kOk) << renewed.detail;
  EXPECT_EQ(renewed.header.expiry_unix, clock.NowUnixSeconds() + 10);
  size_t left = 0;  // nothing else left beside it (the copy moved aside is gone)
  for (const auto& e : std::filesystem::recursive_directory_iterator(a.shared_dir)) left += e.is_regular_file();
  EXPECT_EQ(left, 1u);
}

// L3 only, objects live 10 s, GC and rescans run only when called.
StoreConfig ShortTtlConfig(const TempDir& dir, FaultFileSystem* fs) {
  StoreConfig config = SharedConfig(dir, fs);
  config.ttl_classes = {{"short", 10}};
  config.default_ttl_class = "short";
  config.background_gc = false;
  config.shared_rescan_seconds = 0;
  return config;
}

// A file a worker's GC has moved aside to check keeps its old modification time; a scan by
// another worker meanwhile must not take it for a crashed writer's temporary file. Here the
// file was renewed (by a third worker) before the GC looked: it goes back in place.
TEST(KvStoreFaultTest, FileMovedAsideForItsCheckIsNoStaleTemporary) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  const StoreConfig a = ShortTtlConfig(dir, &fs), other = ShortTtlConfig(dir, nullptr);
  auto store_a = OpenOrDie(a, clock);
  store_a->Put(Key(1), MakePayload(1), 128, "");
  store_a->Flush();
  clock.Advance(11);  // expired, as far as A knows
  {
    auto renewing = OpenOrDie(other, clock);
    renewing->Put(Key(1), MakePayload(1), 128, "");
    renewing->Flush();
  }
  const std::string path = ObjectPath(a.shared_dir, kFingerprint, Key(1));
  const timeval two_hours_ago[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimes(path.c_str(), two_hours_ago), 0);
  fs.pause_open_part = ObjectFileName(Key(1)) + ".tmp.";
  fs.pause_opens = true;
  auto gc = std::async(std::launch::async, [&] { return store_a->CollectGarbage(); });
  ASSERT_TRUE(WaitFor([&] { return fs.paused_opens.load() > 0; }));  // moved aside, about to be checked
  EXPECT_FALSE(Exists(path));
  OpenOrDie(other, clock);  // its scan at open sees the file moved aside
  fs.pause_opens = false;
  gc.get();
  EXPECT_EQ(store_a->Stats().tiers[2].expirations, 0);
  const ObjectKey key = Key(1);
  const ReadOptions read{&key, kFingerprint, clock.NowUnixSeconds(), /*read_payload=*/true, CacheUse::kKeep};
  EXPECT_EQ(ReadObject(*FileSystem::Posix(), path, read).verdict, Verdict::kOk);
  EXPECT_EQ(store_a->Locate(Key(1)), Tier::kShared);  // indexed with its new expiry
}

// GC that cannot read an expired object again to check it keeps the file, and its entry: the
// bytes still count against the budget, and a later GC deletes it.
TEST(KvStoreFaultTest, SharedGcKeepsAnObjectItCannotCheck) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem fs;
  const StoreConfig a = ShortTtlConfig(dir, &fs);
  auto store = OpenOrDie(a, clock);
  store->Put(Key(1), MakePayload(1), 128, "");
  store->Flush();
  const std::string path = ObjectPath(a.shared_dir, kFingerprint, Key(1));
  const int64_t file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  clock.Advance(11);
  fs.fail_reads = true;
  store->CollectGarbage();
  EXPECT_EQ(store->Stats().tiers[2].expirations, 0);
  EXPECT_TRUE(Exists(path));
  EXPECT_EQ(store->Stats().tiers[2].objects, 1);
  EXPECT_EQ(store->Stats().tiers[2].bytes, file_bytes);
  EXPECT_EQ(store->Stats().tiers[2].gc_backlog, 1);
  fs.fail_reads = false;
  EXPECT_EQ(store->CollectGarbage(), 1);  // L1's copy went the first time
  EXPECT_FALSE(Exists(path));
  EXPECT_EQ(store->Stats().tiers[2].objects, 0);
  EXPECT_EQ(store->Stats().tiers[2].expirations, 1);
}

// Two workers share one L3 under load: both write, renew and fetch the same keys while objects
// expire (a fast clock) and room runs out, each GCs and rescans every second. Nothing served differs
// from what was written, and once both have closed the directory holds only sound objects (no
// temporary or moved-aside file left) that a fresh worker indexes in full.
// With `faults`, the first worker's reads and listings fail now and then (an NFS server
// that comes and goes).
void SoakTwoWorkersOnOneSharedDirectory(bool faults) {
  TempDir dir;
  FakeClock clock;
  FaultFileSystem flaky;
  StoreConfig config = SharedConfig(dir, nullptr);
  config.memory_bytes = 8 * 1000;  // most reads go to L3
  config.shared_bytes = 36 * 1200;  // and L3 evicts
  config.ttl_classes = {{"short", 5}};
  config.default_ttl_class = "short";
  config.background_gc = true;
  config.gc_delay_seconds = 1;
  config.shared_rescan_seconds = 1;
  StoreConfig first = config;
  if (faults) first.file_system = &flaky;
  std::unique_ptr<KvStore> workers[2] = {OpenOrDie(first, clock), OpenOrDie(config, clock)};
  constexpr int kKeys = 48;
  std::atomic<int> bad{0}, served{0};
  std::atomic<bool> stop{false};
  std::thread ticking([&] {
    for (int tick = 0; !stop.load(); ++tick) {
      clock.Advance(1);  // well under an hour in all: no in-flight temporary file looks stale
      flaky.fail_reads = faults && tick % 7 < 2;
      flaky.fail_lists = faults && tick % 11 < 3;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    flaky.fail_reads = flaky.fail_lists = false;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      KvStore& store = *workers[t % 2];
      std::mt19937 rng(t);
      // At least 2.5 s and 100 objects served (a slow machine serves fewer per second: objects
      // expire on the clock's schedule), at most 20 s.
      const auto start = std::chrono::steady_clock::now();
      for (;;) {
        const auto ran = std::chrono::steady_clock::now() - start;
        if (ran > std::chrono::seconds(20) || (ran > std::chrono::milliseconds(2500) && served.load() > 100)) break;
        const int k = static_cast<int>(rng() % kKeys);
        if (rng() % 16 == 0) {
          store.Put(Key(k), MakePayload(k), 128, "");
          continue;
        }
        if (!FetchSync(store, {Key(k)}, /*pin=*/true)[0]) continue;
        const Payload p = store.GetMemory(Key(k));  // null: expired since the fetch, never served
        if (p != nullptr && *p != *MakePayload(k)) ++bad;
        served += p != nullptr ? 1 : 0;
        store.Unpin(Key(k));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  stop = true;
  ticking.join();
  for (auto& w : workers) {
    w->Flush();
    EXPECT_LE(w->Stats().tiers[2].bytes, config.shared_bytes);
    EXPECT_EQ(w->Stats().tiers[0].pinned, 0);
    // Objects expired (by GC, or as victims of writes that needed room: the tier is smaller
    // than the key set; on an idle machine unexpired ones are evicted too).
    EXPECT_GT(w->Stats().tiers[2].expirations, 0);
    if (faults && &w == &workers[0]) {
      EXPECT_GT(w->Stats().tiers[2].read_errors, 0);  // the faults did happen
    }
    w.reset();
  }
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(served.load(), 100);
  int64_t objects = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(config.shared_dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    EXPECT_FALSE(IsTemporaryName(name)) << name;
    ObjectKey key;
    ASSERT_TRUE(ParseObjectFileName(name, &key)) << name;
    const ReadOptions read{&key, kFingerprint, INT64_MIN, /*read_payload=*/true, CacheUse::kKeep};
    EXPECT_EQ(ReadObject(*FileSystem::Posix(), e.path().string(), read).verdict, Verdict::kOk) << name;
    ++objects;
  }
  config.background_gc = false;
  EXPECT_EQ(OpenOrDie(config, clock)->Stats().tiers[2].indexed_objects, objects);
}

TEST(KvStoreFaultTest, TwoBusyWorkersOnOneSharedDirectory) { SoakTwoWorkersOnOneSharedDirectory(false); }

TEST(KvStoreFaultTest, TwoBusyWorkersOnOneFlakySharedDirectory) { SoakTwoWorkersOnOneSharedDirectory(true); }

}  // namespace
}  // namespace flashserve::kvstore
