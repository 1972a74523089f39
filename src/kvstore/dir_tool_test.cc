// The offline directory tool behind `flashserve kv stat|verify|gc`.
#include "kvstore/dir_tool.h"

#include <gtest/gtest.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <fstream>

#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::FakeClock;
using testing::Key;
using testing::MakePayload;
using testing::TempDir;

constexpr int64_t kDay = 86400;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// Two models in one root: "aaaa" with 3 agent blocks + 1 chat boundary, "bbbb" with 2 chat blocks.
class DirToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    t0_ = clock_.NowUnixSeconds();
    Write("aaaa", {{0, "agent"}, {1, "agent"}, {2, "agent"}}, ObjectKind::kBlock);
    Write("aaaa", {{3, "chat"}}, ObjectKind::kBoundary);
    Write("bbbb", {{4, "chat"}, {5, "chat"}}, ObjectKind::kBlock);
  }
  void Write(const std::string& fp, std::vector<std::pair<int, std::string>> objects, ObjectKind kind) {
    StoreConfig c;
    c.fingerprint = fp;
    c.disk_dir = dir_.path();
    c.disk_bytes = 1 << 24;
    c.background_gc = false;
    auto store = std::move(KvStore::Open(c, clock_)).value();
    for (const auto& [i, cls] : objects) store->Put(Key(i, kind), MakePayload(i), 128 * (i + 1), cls);
  }
  std::string PathOf(const std::string& fp, int i, ObjectKind kind = ObjectKind::kBlock) {
    return ObjectPath(dir_.path(), fp, Key(i, kind));
  }
  DirReport Scan(DirScanOptions options) {
    auto report = ScanStoreDir(*FileSystem::Posix(), dir_.path(), options);
    EXPECT_TRUE(report.ok()) << report.error().ToString();
    return std::move(report).value();
  }

  TempDir dir_;
  FakeClock clock_;
  int64_t t0_ = 0;
};

TEST_F(DirToolTest, StatSummarisesPerFingerprintAndClass) {
  DirReport r = Scan({t0_ + 3 * kDay - 1800});
  EXPECT_EQ(r.objects, 6);
  ASSERT_EQ(r.fingerprints.size(), 2u);
  EXPECT_EQ(r.fingerprints[0].fingerprint, "aaaa");
  EXPECT_EQ(r.fingerprints[0].objects, 4);
  EXPECT_EQ(r.fingerprints[0].blocks, 3);
  EXPECT_EQ(r.fingerprints[0].boundaries, 1);
  EXPECT_EQ(r.fingerprints[1].objects, 2);
  ASSERT_EQ(r.classes.size(), 2u);
  const ClassSummary& agent = r.classes[0];
  EXPECT_EQ(agent.name, "agent");
  EXPECT_EQ(agent.objects, 3);
  EXPECT_EQ(agent.tokens, 128 * (1 + 2 + 3));
  EXPECT_EQ(agent.expiring_1h, 3);  // half an hour left
  EXPECT_EQ(agent.latest_expiry, t0_ + 3 * kDay);
  EXPECT_EQ(r.classes[1].expiring_1h, 0);
  EXPECT_EQ(r.classes[1].expiring_7d, 3);
  EXPECT_EQ(r.bytes, r.fingerprints[0].bytes + r.fingerprints[1].bytes);
  EXPECT_TRUE(r.bad.empty());
  EXPECT_EQ(r.expired, 0);
  EXPECT_EQ(Scan({t0_ + 3 * kDay}).expired, 3);
}

TEST_F(DirToolTest, VerifyFindsEveryKindOfBadObjectAndDeletesOnRequest) {
  std::string bytes = ReadAll(PathOf("aaaa", 0));
  bytes[bytes.size() - 1] ^= 0x01;
  WriteAll(PathOf("aaaa", 0), bytes);                             // payload damage
  bytes = ReadAll(PathOf("aaaa", 1));
  WriteAll(PathOf("aaaa", 1), bytes.substr(0, bytes.size() / 2));  // truncated
  WriteAll(PathOf("bbbb", 7), ReadAll(PathOf("aaaa", 2)));         // foreign + wrong key
  const std::string misplaced =
      dir_.path() + "/bbbb/00/00/" + std::filesystem::path(PathOf("bbbb", 4)).filename().string();
  WriteAll(misplaced, ReadAll(PathOf("bbbb", 4)));
  ASSERT_EQ(::symlink(PathOf("bbbb", 5).c_str(), (dir_.path() + "/bbbb/00/00/link.block").c_str()), 0);

  EXPECT_EQ(Scan({t0_}).bad.size(), 3u);  // header-only: misses the payload damage
  DirReport r = Scan({t0_, /*verify_payload=*/true});
  EXPECT_EQ(r.bad.size(), 4u);
  for (const BadObject& b : r.bad) EXPECT_FALSE(b.deleted) << b.path;
  EXPECT_EQ(r.objects, 4);  // aaaa block 2 and boundary 3, bbbb 4 and 5
  EXPECT_GE(r.other_files, 1);  // the symlink is not followed
  r = Scan({t0_, true, /*delete_bad=*/true});
  for (const BadObject& b : r.bad) EXPECT_TRUE(b.deleted) << b.path;
  EXPECT_FALSE(std::filesystem::exists(PathOf("aaaa", 0)));
  EXPECT_FALSE(std::filesystem::exists(misplaced));
  EXPECT_TRUE(std::filesystem::exists(PathOf("bbbb", 5)));  // the symlink target is untouched
  EXPECT_TRUE(Scan({t0_, true}).bad.empty());
}

TEST_F(DirToolTest, GcDeletesExpiredObjectsAndStaleTemporaryFiles) {
  const std::string stale = PathOf("aaaa", 0) + ".tmp.x.1";
  WriteAll(stale, "partial");
  const timeval old_times[2] = {{t0_ - 7200, 0}, {t0_ - 7200, 0}};
  ASSERT_EQ(::utimes(stale.c_str(), old_times), 0);
  // Moved aside a minute ago by a worker checking it (a rename keeps its old mtime): not stale.
  const std::string aside = PathOf("aaaa", 1) + ".tmp.aside-" + std::to_string(t0_ + 3 * kDay - 60) + ".x.2";
  WriteAll(aside, ReadAll(PathOf("aaaa", 1)));
  ASSERT_EQ(::utimes(aside.c_str(), old_times), 0);
  // A time in the name far ahead of now (a bogus name) does not keep a file forever.
  const std::string bogus = PathOf("aaaa", 2) + ".tmp.aside-" + std::to_string(t0_ + 30 * kDay) + ".x.3";
  WriteAll(bogus, "partial");
  ASSERT_EQ(::utimes(bogus.c_str(), old_times), 0);
  DirScanOptions gc{t0_ + 3 * kDay};
  gc.delete_expired = true;
  gc.max_deletes_per_second = 1000;
  DirReport r = Scan(gc);
  EXPECT_EQ(r.expired, 3);
  EXPECT_EQ(r.deleted_expired, 3);
  EXPECT_EQ(r.stale_temp_files, 2);
  EXPECT_EQ(r.deleted_temp_files, 2);
  EXPECT_FALSE(std::filesystem::exists(PathOf("aaaa", 0)));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(aside));
  EXPECT_FALSE(std::filesystem::exists(bogus));
  EXPECT_TRUE(std::filesystem::exists(PathOf("aaaa", 3, ObjectKind::kBoundary)));
  EXPECT_EQ(Scan({t0_ + 3 * kDay}).objects, 3);
}

// `kv verify --delete` judged an object bad, and another worker replaced it with a sound copy
// before the delete: only a file still bad when read again is deleted.
// Pictures' tower outputs (`image` objects) are counted apart from blocks and boundaries.
TEST_F(DirToolTest, StatCountsImageObjects) {
  Write("cccc", {{6, "agent"}, {7, "agent"}}, ObjectKind::kImage);
  DirReport r = Scan({t0_});
  ASSERT_EQ(r.fingerprints.size(), 3u);
  EXPECT_EQ(r.fingerprints[2].fingerprint, "cccc");
  EXPECT_EQ(r.fingerprints[2].images, 2);
  EXPECT_EQ(r.fingerprints[2].blocks, 0);
  EXPECT_EQ(r.fingerprints[0].images, 0);
}

TEST(DirToolRaceTest, VerifyDeletesOnlyAFileStillBad) {
  TempDir dir;
  FakeClock clock;
  StoreConfig c;
  c.fingerprint = "aaaa";
  c.disk_dir = dir.path();
  c.disk_bytes = 1 << 24;
  c.background_gc = false;
  std::move(KvStore::Open(c, clock)).value()->Put(Key(0), MakePayload(0), 128, "");
  const std::string path = ObjectPath(dir.path(), "aaaa", Key(0));
  const std::string sound = ReadAll(path);
  std::string damaged = sound;
  damaged[damaged.size() - 1] ^= 0x01;
  WriteAll(path, damaged);
  testing::FaultFileSystem fs;
  fs.pause_payload_reads = true;
  DirScanOptions verify{clock.NowUnixSeconds(), /*verify_payload=*/true, /*delete_bad=*/true};
  auto scan = std::async(std::launch::async, [&] { return ScanStoreDir(fs, dir.path(), verify); });
  ASSERT_TRUE(testing::WaitFor([&] { return fs.paused_reads.load() > 0; }));  // the damaged payload is read
  WriteAll(path + ".new", sound);
  std::filesystem::rename(path + ".new", path);  // replaced by another worker
  fs.pause_payload_reads = false;
  auto report = scan.get();
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  ASSERT_EQ(report->bad.size(), 1u);
  EXPECT_FALSE(report->bad[0].deleted);
  EXPECT_EQ(ReadAll(path), sound);
  EXPECT_TRUE(ScanStoreDir(fs, dir.path(), verify)->bad.empty());
}

TEST(DirToolErrorsTest, MissingRootIsAnError) {
  TempDir dir;
  auto r = ScanStoreDir(*FileSystem::Posix(), dir.Sub("nope"), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), base::ErrorCode::kNotFound);
  WriteAll(dir.Sub("README"), "not a store");
  auto empty = ScanStoreDir(*FileSystem::Posix(), dir.path(), {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->other_files, 1);
  EXPECT_EQ(empty->objects, 0);
}

}  // namespace
}  // namespace flashserve::kvstore
