// KvStore behaviour against a fake clock and real temporary directories: TTL, GC, eviction
// order, restarts, a shared L3, corrupt / truncated / foreign objects, fetch prediction.
#include "kvstore/kv_store.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "base/clock.h"
#include "kvstore/object_file.h"
#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::BaseConfig;
using testing::FakeClock;
using testing::Key;
using testing::kFingerprint;
using testing::MakePayload;
using testing::TempDir;

constexpr int64_t kDay = 86400;

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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string DiskPath(const StoreConfig& c, const ObjectKey& key, const std::string& fp = kFingerprint) {
  return ObjectPath(c.disk_dir, fp, key);
}

TEST(KvStoreTest, PutServesFromMemoryAndWritesThrough) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  auto store = OpenOrDie(config, clock);
  EXPECT_EQ(store->GetMemory(Key(1)), nullptr);
  EXPECT_FALSE(store->Locate(Key(1)).has_value());
  store->Put(Key(1), MakePayload(1), 128, "");
  ASSERT_NE(store->GetMemory(Key(1)), nullptr);
  EXPECT_EQ(*store->GetMemory(Key(1)), *MakePayload(1));
  EXPECT_EQ(store->Locate(Key(1)), Tier::kMemory);
  store->Flush();
  EXPECT_TRUE(Exists(DiskPath(config, Key(1))));
  EXPECT_FALSE(Exists(DiskPath(config, Key(1, ObjectKind::kBoundary))));
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[0].hits, 2);
  EXPECT_EQ(stats.tiers[0].misses, 1);
  EXPECT_EQ(stats.tiers[1].objects, 1);
  EXPECT_GT(stats.tiers[1].bytes_written, 1000);
  EXPECT_FALSE(stats.tiers[2].writable);  // L3 not configured
  EXPECT_EQ(stats.classes[1].name, "chat");
  EXPECT_EQ(stats.classes[1].objects[1], 1);  // default class "chat" on disk
}

TEST(KvStoreTest, TtlExpiryIsExactToTheSecondInEveryTier) {
  TempDir dir;
  FakeClock clock;
  const int64_t t0 = clock.NowUnixSeconds();
  StoreConfig config = BaseConfig(dir);
  config.shared_dir = dir.Sub("l3");
  config.shared_bytes = 1 << 24;
  auto store = OpenOrDie(config, clock);
  store->Put(Key(1), MakePayload(1), 128, "agent");
  store->Put(Key(2), MakePayload(2), 128, "chat");
  store->Flush();
  clock.Set(t0 + 3 * kDay - 1);
  EXPECT_NE(store->GetMemory(Key(1)), nullptr);
  clock.Set(t0 + 3 * kDay);
  EXPECT_EQ(store->GetMemory(Key(1)), nullptr);
  EXPECT_FALSE(store->Locate(Key(1)).has_value());
  EXPECT_EQ(FetchSync(*store, {Key(1)}), std::vector<bool>{false});
  EXPECT_FALSE(Exists(DiskPath(config, Key(1))));  // the read deleted it
  EXPECT_FALSE(Exists(ObjectPath(config.shared_dir, kFingerprint, Key(1))));
  EXPECT_EQ(store->Locate(Key(2)), Tier::kMemory);
  clock.Set(t0 + 7 * kDay - 1);
  EXPECT_EQ(FetchSync(*store, {Key(2)}), std::vector<bool>{true});
  clock.Set(t0 + 7 * kDay);
  EXPECT_EQ(FetchSync(*store, {Key(2)}), std::vector<bool>{false});
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[1].expirations, 2);
  EXPECT_EQ(stats.tiers[2].expirations, 2);
}

TEST(KvStoreTest, ClassesAreChosenPerObjectAndUnknownFallsBack) {
  TempDir dir;
  FakeClock clock;
  const int64_t t0 = clock.NowUnixSeconds();
  StoreConfig config = BaseConfig(dir);
  config.ttl_classes = {{"short", 10}, {"long", 100}};
  config.default_ttl_class = "long";
  auto store = OpenOrDie(config, clock);
  store->Put(Key(1), MakePayload(1), 128, "short");
  store->Put(Key(2), MakePayload(2), 128, "");
  store->Put(Key(3), MakePayload(3), 128, "no-such-class");
  store->Flush();
  ReadOutcome out = ReadObject(*FileSystem::Posix(), DiskPath(config, Key(3)), ReadOptions{});
  ASSERT_EQ(out.verdict, Verdict::kOk);
  EXPECT_EQ(out.header.ttl_class, "long");
  EXPECT_EQ(out.header.expiry_unix, t0 + 100);
  EXPECT_EQ(out.header.tokens, 128);
  clock.Set(t0 + 10);
  EXPECT_FALSE(store->Locate(Key(1)).has_value());
  EXPECT_TRUE(store->Locate(Key(2)).has_value());
  EXPECT_TRUE(store->Locate(Key(3)).has_value());
  clock.Set(t0 + 100);
  EXPECT_FALSE(store->Locate(Key(3)).has_value());
}

TEST(KvStoreTest, CollectGarbageDeletesExpiredObjectsInEveryTier) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.shared_dir = dir.Sub("l3");
  config.shared_bytes = 1 << 24;
  auto store = OpenOrDie(config, clock);
  for (int i = 0; i < 10; ++i) store->Put(Key(i), MakePayload(i), 128, i < 5 ? "agent" : "chat");
  store->Flush();
  EXPECT_EQ(store->CollectGarbage(), 0);
  clock.Advance(3 * kDay);
  StoreStats stats = store->Stats();
  for (int t = 0; t < kNumTiers; ++t) EXPECT_EQ(stats.tiers[t].gc_backlog, 5) << t;
  EXPECT_EQ(store->CollectGarbage(), 15);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Exists(DiskPath(config, Key(i))), i >= 5) << i;
    EXPECT_EQ(Exists(ObjectPath(config.shared_dir, kFingerprint, Key(i))), i >= 5) << i;
  }
  stats = store->Stats();
  for (int t = 0; t < kNumTiers; ++t) {
    EXPECT_EQ(stats.tiers[t].gc_backlog, 0) << t;
    EXPECT_EQ(stats.tiers[t].expirations, 5) << t;
    EXPECT_EQ(stats.tiers[t].objects, 5) << t;
  }
}

TEST(KvStoreTest, BackgroundGcDeletesWithinTheDelay) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.background_gc = true;
  config.gc_delay_seconds = 1;
  auto store = OpenOrDie(config, clock);
  store->Put(Key(1), MakePayload(1), 128, "agent");
  store->Flush();
  clock.Advance(3 * kDay);
  const double start = base::MonotonicSeconds();
  while (Exists(DiskPath(config, Key(1))) && base::MonotonicSeconds() - start < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(Exists(DiskPath(config, Key(1))));
  EXPECT_LT(base::MonotonicSeconds() - start, 1.0);
}

TEST(KvStoreTest, GcDeletesAreRateLimited) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.gc_max_deletes_per_second = 50;
  auto store = OpenOrDie(config, clock);
  for (int i = 0; i < 40; ++i) store->Put(Key(i), MakePayload(i, 100), 128, "agent");
  store->Flush();
  clock.Advance(3 * kDay);
  const double start = base::MonotonicSeconds();
  EXPECT_EQ(store->CollectGarbage(), 80);  // 40 in memory (unpaced) + 40 files
  EXPECT_GE(base::MonotonicSeconds() - start, 0.6);  // burst of 5, then 35 at 50/s
}

TEST(KvStoreTest, MemoryEvictsExpiredFirstThenLeastValuableNeverPinned) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir, /*with_disk=*/false);
  config.memory_bytes = 3000;
  config.ttl_classes = {{"short", 10}, {"chat", kDay}};
  config.default_ttl_class = "chat";
  auto store = OpenOrDie(config, clock);
  store->Put(Key(1), MakePayload(1), 128, "short");
  store->Put(Key(2), MakePayload(2), 128, "");
  store->Put(Key(3), MakePayload(3), 128, "");
  clock.Advance(5);
  EXPECT_NE(store->GetMemory(Key(1)), nullptr);  // key 1 is the most recently used...
  clock.Advance(15);                             // ...but expired now, so it goes first
  store->Put(Key(4), MakePayload(4), 128, "");
  EXPECT_EQ(store->Stats().tiers[0].expirations, 1);
  EXPECT_EQ(store->GetMemory(Key(1)), nullptr);
  clock.Advance(10);
  EXPECT_NE(store->GetMemory(Key(3)), nullptr);  // key 2 is now the least recently used
  store->Put(Key(5), MakePayload(5), 128, "");
  EXPECT_EQ(store->GetMemory(Key(2)), nullptr);
  EXPECT_EQ(store->Stats().tiers[0].evictions, 1);
  for (int k : {3, 4, 5}) EXPECT_TRUE(store->Pin(Key(k)));
  EXPECT_FALSE(store->Pin(Key(2)));  // not in memory: nothing to pin
  EXPECT_EQ(store->Stats().tiers[0].pinned, 3);
  store->Put(Key(6), MakePayload(6), 128, "");  // no room: everything is pinned
  EXPECT_EQ(store->GetMemory(Key(6)), nullptr);
  for (int k : {3, 4, 5}) EXPECT_NE(store->GetMemory(Key(k)), nullptr) << k;
  store->Unpin(Key(4));
  store->Put(Key(6), MakePayload(6), 128, "");
  EXPECT_EQ(store->GetMemory(Key(4)), nullptr);
  EXPECT_NE(store->GetMemory(Key(6)), nullptr);
  EXPECT_LE(store->Stats().tiers[0].bytes, 3000);
}

// The file size of a MakePayload object (1,000 bytes) in TTL class "short".
int64_t ShortObjectFileBytes() {
  ObjectHeader h;
  h.fingerprint = kFingerprint;
  h.ttl_class = "short";
  return static_cast<int64_t>(EncodedHeaderBytes(h)) + 1000;
}

TEST(KvStoreTest, DiskEvictsExpiredFirstThenLeastValuable) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.ttl_classes = {{"short", 10}, {"chat", kDay}};
  config.default_ttl_class = "chat";
  const int64_t file_bytes = ShortObjectFileBytes();
  config.disk_bytes = 3 * file_bytes;
  auto store = OpenOrDie(config, clock);
  store->Put(Key(1), MakePayload(1), 128, "short");
  store->Put(Key(2), MakePayload(2), 128, "short");  // "short" keeps file sizes equal
  store->Put(Key(3), MakePayload(3), 128, "short");
  store->Flush();
  clock.Advance(5);
  for (int k : {1, 3}) {  // keys 1 and 3 are used: key 2 becomes the least valuable
    store->Pin(Key(k));
    store->Unpin(Key(k));
  }
  store->Put(Key(4), MakePayload(4), 128, "short");
  store->Flush();
  EXPECT_TRUE(Exists(DiskPath(config, Key(1))));
  EXPECT_FALSE(Exists(DiskPath(config, Key(2))));
  EXPECT_EQ(store->Stats().tiers[1].evictions, 1);
  clock.Advance(6);  // keys 1 and 3 expired (written at t0), key 4 not
  store->Put(Key(5), MakePayload(5), 128, "short");
  store->Flush();
  EXPECT_EQ(store->Stats().tiers[1].expirations, 1);
  EXPECT_TRUE(Exists(DiskPath(config, Key(4))));
  EXPECT_TRUE(Exists(DiskPath(config, Key(5))));
  EXPECT_EQ(Exists(DiskPath(config, Key(1))) + Exists(DiskPath(config, Key(3))), 1);
  EXPECT_LE(store->Stats().tiers[1].bytes, config.disk_bytes);
}

// Renewing an object rewrites its file: in a full tier the new copy takes the old one's place,
// so nothing else is evicted for it.
TEST(KvStoreTest, DiskRewriteReplacesItsOwnBytes) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  config.ttl_classes = {{"short", 100}};
  config.default_ttl_class = "short";
  const int64_t file_bytes = ShortObjectFileBytes();
  config.disk_bytes = 2 * file_bytes;
  auto store = OpenOrDie(config, clock);
  store->Put(Key(1), MakePayload(1), 128, "");
  store->Put(Key(2), MakePayload(2), 128, "");
  store->Flush();
  const std::string first = ReadFile(DiskPath(config, Key(1)));
  clock.Advance(50);  // over a quarter of the TTL: Put renews the file with the later expiry
  store->Put(Key(1), MakePayload(1), 128, "");
  store->Flush();
  EXPECT_NE(ReadFile(DiskPath(config, Key(1))), first);
  EXPECT_TRUE(Exists(DiskPath(config, Key(2))));
  EXPECT_EQ(store->Stats().tiers[1].evictions, 0);
  EXPECT_EQ(store->Stats().tiers[1].bytes, 2 * file_bytes);
}

TEST(KvStoreTest, SurvivesRestart) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  {
    auto store = OpenOrDie(config, clock);
    for (int i = 0; i < 20; ++i) {
      store->Put(Key(i, i % 2 ? ObjectKind::kBoundary : ObjectKind::kBlock), MakePayload(i), 128 * (i + 1), "");
    }
  }  // closed: writes flushed
  auto store = OpenOrDie(config, clock);
  const StoreStats stats = store->Stats();
  EXPECT_EQ(stats.tiers[1].indexed_objects, 20);
  EXPECT_EQ(stats.tiers[0].objects, 0);
  std::vector<ObjectKey> keys;
  for (int i = 0; i < 20; ++i) keys.push_back(Key(i, i % 2 ? ObjectKind::kBoundary : ObjectKind::kBlock));
  EXPECT_EQ(store->Locate(keys[3]), Tier::kDisk);
  EXPECT_FALSE(store->Locate(Key(3, ObjectKind::kBlock)).has_value());  // kind is part of the key
  EXPECT_EQ(FetchSync(*store, keys), std::vector<bool>(20, true));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(*store->GetMemory(keys[i]), *MakePayload(i)) << i;
  EXPECT_EQ(store->Stats().tiers[1].hits, 20);
  clock.Advance(7 * kDay);
  store->Close();
  EXPECT_FALSE(OpenOrDie(config, clock)->Locate(keys[0]).has_value());  // expiry survives too
}

// A scan that finds more than the budget holds (a budget lowered since, or other workers'
// writes to a shared directory) evicts down to it: a tier's view never exceeds its budget.
TEST(KvStoreTest, AScanThatFindsMoreThanTheBudgetEvictsDownToIt) {
  TempDir dir;
  FakeClock clock;
  StoreConfig config = BaseConfig(dir);
  {
    auto store = OpenOrDie(config, clock);
    for (int i = 0; i < 10; ++i) store->Put(Key(i), MakePayload(i), 128, "");
  }
  auto bigger = OpenOrDie(config, clock);
  const int64_t all = bigger->Stats().tiers[1].bytes;
  ASSERT_EQ(bigger->Stats().tiers[1].objects, 10);
  bigger->Close();
  config.disk_bytes = all * 4 / 10 + 1;  // room for four objects
  auto smaller = OpenOrDie(config, clock);
  const TierStats disk = smaller->Stats().tiers[1];
  EXPECT_LE(disk.bytes, config.disk_bytes);
  EXPECT_EQ(disk.objects, 4);
  EXPECT_EQ(disk.evictions, 6);
  int on_disk = 0;
  for (int i = 0; i < 10; ++i) on_disk += Exists(DiskPath(config, Key(i))) ? 1 : 0;
  EXPECT_EQ(on_disk, 4);  // the evicted files are gone, not only unindexed
}

TEST(KvStoreTest, TwoStoresShareOneL3Directory) {
  TempDir dir;
  FakeClock clock;
  StoreConfig a = BaseConfig(dir);
  a.disk_dir = dir.Sub("a");
  a.shared_dir = dir.Sub("shared");
  a.shared_bytes = 1 << 24;
  StoreConfig b = a;
  b.disk_dir = dir.Sub("b");
  auto store_a = OpenOrDie(a, clock);
  auto store_b = OpenOrDie(b, clock);
  store_a->Put(Key(1), MakePayload(1), 128, "");
  store_a->Flush();
  EXPECT_FALSE(store_b->Locate(Key(1)).has_value());  // B's index has not seen it yet
  EXPECT_EQ(FetchSync(*store_b, {Key(1)}), std::vector<bool>{true});  // the filesystem probe has
  EXPECT_EQ(*store_b->GetMemory(Key(1)), *MakePayload(1));
  store_b->Flush();
  EXPECT_TRUE(Exists(DiskPath(b, Key(1))));  // promoted into B's local disk
  store_b->Put(Key(2), MakePayload(2), 128, "");
  store_b->Flush();
  EXPECT_EQ(FetchSync(*store_a, {Key(2)}), std::vector<bool>{true});
  EXPECT_EQ(store_b->Stats().tiers[2].hits, 1);
}

TEST(KvStoreTest, SharedRescanMakesOtherWorkersObjectsLocatable) {
  TempDir dir;
  FakeClock clock;
  StoreConfig a = BaseConfig(dir, /*with_disk=*/false);
  a.shared_dir = dir.Sub("shared");
  a.shared_bytes = 1 << 24;
  StoreConfig b = a;
  b.shared_probe_on_miss = false;
  b.background_gc = true;
  b.gc_delay_seconds = 1;
  b.shared_rescan_seconds = 1;
  auto store_a = OpenOrDie(a, clock);
  auto store_b = OpenOrDie(b, clock);
  store_a->Put(Key(1), MakePayload(1), 128, "");
  store_a->Flush();
  EXPECT_EQ(FetchSync(*store_b, {Key(1)}), std::vector<bool>{false});  // no probe, not indexed yet
  const double start = base::MonotonicSeconds();
  while (!store_b->Locate(Key(1)).has_value() && base::MonotonicSeconds() - start < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(store_b->Locate(Key(1)), Tier::kShared);
  std::filesystem::remove(ObjectPath(a.shared_dir, kFingerprint, Key(1)));  // e.g. `flashserve kv gc`
  clock.Advance(1);
  const double removed = base::MonotonicSeconds();
  while (store_b->Locate(Key(1)).has_value() && base::MonotonicSeconds() - removed < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(store_b->Locate(Key(1)).has_value());  // the next rescan dropped it
  store_a->Put(Key(2), MakePayload(2), 128, "");
  store_a->Flush();
  EXPECT_EQ(FetchSync(*store_b, {Key(2)}), std::vector<bool>{false});
  while (!store_b->Locate(Key(2)).has_value() && base::MonotonicSeconds() - removed < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(FetchSync(*store_b, {Key(2)}), std::vector<bool>{true});
}

TEST(KvStoreTest, SharedGcKeepsAnObjectAnotherWorkerRenewed) {
  TempDir dir;
  FakeClock clock;
  const int64_t t0 = clock.NowUnixSeconds();
  StoreConfig a = BaseConfig(dir, /*with_disk=*/false);
  a.shared_dir = dir.Sub("shared");
  a.shared_bytes = 1 << 24;
  a.ttl_classes = {{"short", 10}};
  a.default_ttl_class = "short";
  auto store_a = OpenOrDie(a, clock);
  auto store_b = OpenOrDie(a, clock);
  store_a->Put(Key(1), MakePayload(1), 128, "");
  store_a->Flush();
  EXPECT_EQ(FetchSync(*store_b, {Key(1)}), std::vector<bool>{true});  // B indexes it: expiry t0 + 10
  clock.Set(t0 + 8);
  store_a->Put(Key(1), MakePayload(1), 128, "");  // renewed: the shared file now expires at t0 + 18
  store_a->Flush();
  clock.Set(t0 + 12);
  EXPECT_EQ(store_b->CollectGarbage(), 1);  // only B's expired memory copy
  EXPECT_TRUE(Exists(ObjectPath(a.shared_dir, kFingerprint, Key(1))));
  EXPECT_EQ(store_b->Locate(Key(1)), Tier::kShared);
  EXPECT_EQ(FetchSync(*store_b, {Key(1)}), std::vector<bool>{true});
  clock.Set(t0 + 18);
  EXPECT_EQ(store_b->CollectGarbage(), 2);  // memory + the shared file
  EXPECT_FALSE(Exists(ObjectPath(a.shared_dir, kFingerprint, Key(1))));
}

// Pages of path the page cache holds (mincore over a read-only mapping).
int64_t ResidentPages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  const size_t size = std::filesystem::file_size(path);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  int64_t n = -1;
  if (map != MAP_FAILED && ::mincore(map, size, resident.data()) == 0) {
    n = 0;
    for (unsigned char r : resident) n += r & 1;
  }
  if (map != MAP_FAILED) ::munmap(map, size);
  return n;
}

// Drops path's pages from the page cache; false where the file system keeps them anyway.
bool DropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  return ResidentPages(path) == 0;
}

// A restart's index scan and Fetch from L2: buffered tiers leave the header page (the scan reads
// one page, no readahead window) and then the whole object in the page cache; direct-I/O tiers
// (StoreConfig::direct_io) leave nothing there.
TEST(KvStoreTest, DirectIoReadsLeaveNothingInThePageCache) {
  for (bool direct : {false, true}) {
    SCOPED_TRACE(direct ? "direct" : "buffered");
    ReadBufferPool buffers(0);
    const auto none = [](size_t, base::Result<base::SharedBytes>) {};
    if (direct && !FileSystem::Posix()->ReadWholeFilesDirect({}, buffers, none)) {
      GTEST_SKIP() << "io_uring is unavailable here: the store reads buffered";
    }
    TempDir dir;
    FakeClock clock;
    StoreConfig config = testing::BaseConfig(dir);
    config.memory_bytes = 8 << 20;
    config.direct_io = direct;
    OpenOrDie(config, clock)->Put(Key(1), MakePayload(1, 1 << 20), 128, "chat");  // closed: written through
    const std::string path = DiskPath(config, Key(1));
    ASSERT_TRUE(Exists(path));
    if (!DropFromPageCache(path)) GTEST_SKIP() << "this file system keeps dropped pages cached";
    auto store = OpenOrDie(config, clock);  // its index scan reads the header
    EXPECT_EQ(ResidentPages(path), direct ? 0 : 1) << "after the index scan";
    ASSERT_TRUE(DropFromPageCache(path));
    ASSERT_EQ(FetchSync(*store, {Key(1)}), std::vector<bool>{true});
    const int64_t pages = static_cast<int64_t>((std::filesystem::file_size(path) + 4095) / 4096);
    EXPECT_EQ(ResidentPages(path), direct ? 0 : pages) << "after the Fetch";
  }
}

}  // namespace
}  // namespace flashserve::kvstore
