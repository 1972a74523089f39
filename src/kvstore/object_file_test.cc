// Object format, file naming, checked reads, the POSIX seam and config validation.
#include "kvstore/object_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::Key;
using testing::MakePayload;
using testing::TempDir;

ObjectHeader SampleHeader() {
  ObjectHeader h;
  h.key = Key(7, ObjectKind::kBoundary);
  h.fingerprint = "abc123";
  h.ttl_class = "chat";
  h.tokens = 256;
  h.created_unix = 1000;
  h.expiry_unix = 2000;
  return h;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

TEST(ObjectFileTest, HeaderRoundTripsAndEveryByteIsChecked) {
  ObjectHeader h = SampleHeader();
  h.payload_bytes = 5;
  h.payload_checksum = Checksum64("hello");
  const std::string bytes = EncodeHeader(&h);
  EXPECT_EQ(bytes.size(), h.header_bytes);
  EXPECT_EQ(bytes.size(), EncodedHeaderBytes(h));
  auto back = DecodeHeader(bytes + "trailing payload");
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->key, h.key);
  EXPECT_EQ(back->fingerprint, "abc123");
  EXPECT_EQ(back->ttl_class, "chat");
  EXPECT_EQ(back->tokens, 256);
  EXPECT_EQ(back->created_unix, 1000);
  EXPECT_EQ(back->expiry_unix, 2000);
  EXPECT_EQ(back->payload_bytes, 5u);
  EXPECT_EQ(back->payload_checksum, h.payload_checksum);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x01;
    EXPECT_FALSE(DecodeHeader(bad).ok()) << "flipped byte " << i;
  }
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeHeader(bytes.substr(0, n)).ok()) << n;
}

TEST(ObjectFileTest, ChecksumSeesEveryByteAndLength) {
  std::string data(100, 'x');
  const uint64_t base = Checksum64(data);
  EXPECT_EQ(base, Checksum64(data));
  for (size_t i = 0; i < data.size(); ++i) {
    std::string d = data;
    d[i] = 'y';
    EXPECT_NE(Checksum64(d), base) << i;
  }
  for (size_t n = 0; n < 70; ++n) EXPECT_NE(Checksum64(data.substr(0, n)), Checksum64(data.substr(0, n + 1))) << n;
}

TEST(ObjectFileTest, NamesAndPathsStayInsideTheRoot) {
  const ObjectKey key = Key(1);
  const std::string hex = kv::ToHex(key.hash);
  EXPECT_EQ(ObjectPath("/r", "beef", key),
            "/r/beef/" + hex.substr(0, 2) + "/" + hex.substr(2, 2) + "/" + hex + ".block");
  ObjectKey parsed;
  ASSERT_TRUE(ParseObjectFileName(ObjectFileName(key), &parsed));
  EXPECT_EQ(parsed, key);
  ASSERT_TRUE(ParseObjectFileName(hex + ".boundary", &parsed));
  EXPECT_EQ(parsed.kind, ObjectKind::kBoundary);
  std::string upper = hex;
  upper[0] = 'A';
  for (const std::string& bad : {hex, hex + ".blk", hex + ".block.tmp.1.2", upper + ".block", hex.substr(1) + ".block",
                                 std::string("../") + hex.substr(3) + ".block"}) {
    EXPECT_FALSE(ParseObjectFileName(bad, &parsed)) << bad;
  }
  EXPECT_TRUE(IsTemporaryName(hex + ".block.tmp.1.2"));
  EXPECT_TRUE(IsValidFingerprint("0123456789abcdef"));
  for (const char* bad : {"", "..", "a/b", "ABC", "abc ", "g1"}) EXPECT_FALSE(IsValidFingerprint(bad)) << bad;
  EXPECT_FALSE(IsValidFingerprint(std::string(kMaxFingerprintChars + 1, 'a')));
  EXPECT_TRUE(IsValidClassName("agent-2_x"));
  EXPECT_FALSE(IsValidClassName("Chat"));
  EXPECT_FALSE(IsValidClassName("a/b"));
}

// A shard folder replaced by a symbolic link to a folder outside the root: nothing is read,
// written, moved or deleted through it, though the file beyond it is a sound object.
TEST(ObjectFileTest, NothingGoesThroughALinkedShardFolder) {
  TempDir dir;
  FileSystem& fs = *FileSystem::Posix();
  const ObjectHeader header = SampleHeader();
  const std::string path = ObjectPath(dir.Sub("root"), "abc123", header.key);
  const std::string leaf = std::filesystem::path(path).parent_path().string();
  const std::string outside = dir.Sub("outside");
  ASSERT_TRUE(WriteObject(fs, outside + "/" + ObjectFileName(header.key), header, *MakePayload(3)).ok());
  std::filesystem::create_directories(std::filesystem::path(leaf).parent_path());
  std::filesystem::create_directory_symlink(outside, leaf);
  ReadOptions options;
  options.expected_key = &header.key;
  options.fingerprint = "abc123";
  options.now_unix = INT64_MIN;
  EXPECT_EQ(ReadObject(fs, path, options).verdict, Verdict::kCorrupt) << "not read through the link";
  EXPECT_FALSE(fs.Remove(path).ok());
  EXPECT_FALSE(fs.MoveAside(path, 0).ok());
  EXPECT_FALSE(WriteObject(fs, path, header, *MakePayload(4)).ok());
  EXPECT_EQ(RemoveObjectUnlessLive(fs, path, options, 0).verdict, Verdict::kIoError) << "kept, not deleted";
  const ReadOutcome beyond = ReadObject(fs, outside + "/" + ObjectFileName(header.key), options);
  EXPECT_EQ(beyond.verdict, Verdict::kOk) << "the file outside is untouched";
  EXPECT_EQ(std::filesystem::directory_iterator(outside)->path().filename(), ObjectFileName(header.key));
}

class ReadObjectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ObjectPath(dir_.path(), "abc123", SampleHeader().key);
    ASSERT_TRUE(WriteObject(fs_, path_, SampleHeader(), *MakePayload(3)).ok());
  }
  // ReadObject, checked against CheckObjectBytes on the same file (the direct-read path): the
  // same verdict and payload in every case.
  ReadOutcome Read(int64_t now = 1500, std::string_view fingerprint = "abc123") {
    const ObjectKey key = SampleHeader().key;
    const ReadOptions options{&key, fingerprint, now, true};
    ReadOutcome out = ReadObject(fs_, path_, options);
    if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path_))) {
      const ReadOutcome in_memory = CheckObjectBytes(base::MakeSharedBytes(ReadAll(path_)), options);
      EXPECT_EQ(VerdictName(in_memory.verdict), VerdictName(out.verdict)) << in_memory.detail;
      EXPECT_EQ(in_memory.payload == nullptr, out.payload == nullptr);
      if (in_memory.payload && out.payload) {
        EXPECT_EQ(*in_memory.payload, *out.payload);
      }
      EXPECT_EQ(in_memory.file_bytes, out.file_bytes);
    }
    return out;
  }
  TempDir dir_;
  FileSystem& fs_ = *FileSystem::Posix();
  std::string path_;
};

TEST_F(ReadObjectTest, GoodObjectReadsBack) {
  ReadOutcome out = Read();
  ASSERT_EQ(out.verdict, Verdict::kOk) << out.detail;
  ASSERT_NE(out.payload, nullptr);
  EXPECT_EQ(*out.payload, *MakePayload(3));
  EXPECT_EQ(out.header.tokens, 256);
  EXPECT_EQ(out.file_bytes, static_cast<int64_t>(out.header.header_bytes + 1000));
}

TEST_F(ReadObjectTest, ExpiryIsExactToTheSecond) {
  EXPECT_EQ(Read(1999).verdict, Verdict::kOk);
  EXPECT_EQ(Read(2000).verdict, Verdict::kExpired);
  const ObjectKey key = SampleHeader().key;
  EXPECT_EQ(ReadObject(fs_, path_, ReadOptions{&key, "", INT64_MIN, true}).verdict, Verdict::kOk);
}

TEST_F(ReadObjectTest, CorruptPayloadByte) {
  std::string bytes = ReadAll(path_);
  bytes[bytes.size() - 10] ^= 0x40;
  WriteAll(path_, bytes);
  EXPECT_EQ(Read().verdict, Verdict::kCorrupt);
  const ObjectKey key = SampleHeader().key;  // a header-only read cannot see it
  EXPECT_EQ(ReadObject(fs_, path_, ReadOptions{&key, "abc123", 1500, false}).verdict, Verdict::kOk);
}

TEST_F(ReadObjectTest, TruncatedAndOverlongFiles) {
  const std::string bytes = ReadAll(path_);
  WriteAll(path_, bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(Read().verdict, Verdict::kCorrupt);
  WriteAll(path_, bytes.substr(0, 40));
  EXPECT_EQ(Read().verdict, Verdict::kCorrupt);
  WriteAll(path_, "");
  EXPECT_EQ(Read().verdict, Verdict::kCorrupt);
  WriteAll(path_, bytes + "x");
  EXPECT_EQ(Read().verdict, Verdict::kCorrupt);
}

TEST_F(ReadObjectTest, ForeignMissingAndMisnamed) {
  EXPECT_EQ(Read(1500, "ffff").verdict, Verdict::kForeign);
  const ObjectKey other = Key(8);
  EXPECT_EQ(ReadObject(fs_, path_, ReadOptions{&other, "abc123", 1500, true}).verdict, Verdict::kCorrupt);
  EXPECT_EQ(ReadObject(fs_, path_ + "x", ReadOptions{}).verdict, Verdict::kMissing);
}

TEST_F(ReadObjectTest, SymlinkIsNeverFollowed) {
  const std::string link = dir_.Sub("link.block");
  ASSERT_EQ(::symlink(path_.c_str(), link.c_str()), 0);
  EXPECT_EQ(ReadObject(fs_, link, ReadOptions{}).verdict, Verdict::kCorrupt);
  EXPECT_EQ(ReadObject(fs_, dir_.path(), ReadOptions{}).verdict, Verdict::kCorrupt);  // a directory
}

TEST(PosixFileSystemTest, FileTooLargeFailsLikeDiskFullAndLeavesNothing) {
  TempDir dir;
  FileSystem& fs = *FileSystem::Posix();
  const std::string path = dir.Sub("a/b/object.block");
  ASSERT_TRUE(fs.WriteAtomic(path, "head", "small").ok());  // creates a/b
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit tiny = old;
  tiny.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  base::Status s = fs.WriteAtomic(path, "head", std::string(100000, 'z'));
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), base::ErrorCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(ReadAll(path), "headsmall");  // the old object is intact
  auto entries = fs.List(dir.Sub("a/b"));
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1u);  // no temporary file left behind
}

TEST(PosixFileSystemTest, ErrorsAreValues) {
  TempDir dir;
  FileSystem& fs = *FileSystem::Posix();
  EXPECT_EQ(fs.List(dir.Sub("missing")).error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(fs.OpenForRead(dir.Sub("missing")).error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(fs.ModifiedTime(dir.Sub("missing")).error().code(), base::ErrorCode::kNotFound);
  EXPECT_TRUE(fs.Remove(dir.Sub("missing")).ok());
  WriteAll(dir.Sub("file"), "x");
  EXPECT_FALSE(fs.CreateDirs(dir.Sub("file/sub")).ok());  // a file in the way
  EXPECT_FALSE(fs.WriteAtomic(dir.Sub("file/sub/o"), "", "x").ok());
  EXPECT_FALSE(fs.Remove(dir.path()).ok());  // never a directory
}

TEST(StoreConfigTest, ValidateRejectsEachBadField) {
  TempDir dir;
  StoreConfig good = testing::BaseConfig(dir);
  ASSERT_TRUE(good.Validate().ok()) << good.Validate().ToString();
  auto expect_bad = [&](const char* what, auto mutate) {
    StoreConfig c = good;
    mutate(c);
    EXPECT_FALSE(c.Validate().ok()) << what;
  };
  expect_bad("fingerprint", [](StoreConfig& c) { c.fingerprint = "../etc"; });
  expect_bad("empty fingerprint", [](StoreConfig& c) { c.fingerprint = ""; });
  expect_bad("memory", [](StoreConfig& c) { c.memory_bytes = -1; });
  expect_bad("disk bytes", [](StoreConfig& c) { c.disk_bytes = 0; });
  expect_bad("shared bytes", [&](StoreConfig& c) { c.shared_dir = dir.Sub("l3"); });
  expect_bad("same dirs", [](StoreConfig& c) { c.shared_dir = c.disk_dir; c.shared_bytes = 1; });
  expect_bad("class name", [](StoreConfig& c) { c.ttl_classes = {{"Chat!", 10}}; c.default_ttl_class = "Chat!"; });
  expect_bad("class seconds", [](StoreConfig& c) { c.ttl_classes = {{"chat", 0}}; });
  expect_bad("duplicate", [](StoreConfig& c) { c.ttl_classes = {{"chat", 1}, {"chat", 2}}; });
  expect_bad("default", [](StoreConfig& c) { c.default_ttl_class = "batch"; });
  expect_bad("gc delay", [](StoreConfig& c) { c.gc_delay_seconds = 0; });
  expect_bad("gc rate", [](StoreConfig& c) { c.gc_max_deletes_per_second = 0; });
  expect_bad("threads", [](StoreConfig& c) { c.io_threads = 0; });
  // The default scales with the cores: one I/O thread per 4, at least 2, at most 8.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(StoreConfig{}.io_threads, std::clamp(cores / 4, 2, 8));
  expect_bad("rescan", [](StoreConfig& c) { c.shared_rescan_seconds = -1; });
  expect_bad("retry", [](StoreConfig& c) { c.write_retry_seconds = 0; });
  expect_bad("backlog", [](StoreConfig& c) { c.max_pending_write_bytes = 0; });
  expect_bad("no events", [](StoreConfig& c) { c.event_log_capacity = 0; });
  expect_bad("negative events", [](StoreConfig& c) { c.event_log_capacity = -1; });
  StoreConfig custom = good;
  custom.ttl_classes = {{"batch", 60}};
  custom.default_ttl_class = "batch";
  EXPECT_TRUE(custom.Validate().ok());
  EXPECT_EQ(good.Classes().size(), 2u);
  EXPECT_EQ(good.Classes()[0].seconds, 3 * 86400);
  EXPECT_EQ(good.Classes()[1].seconds, 7 * 86400);
}

}  // namespace
}  // namespace flashserve::kvstore
