// FileSystem::ReadWholeFilesDirect on POSIX (kvstore/direct_reader.cc): every file of a batch
// comes back whole and exactly once, whatever its size (empty, unaligned, several per group,
// larger than a group), with the seam's errors for missing files, symlinks, directories and
// FIFOs, from several threads at once; kept bytes stay valid in the pool; few descriptors open.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "fmt/format.h"
#include "kvstore/file_system.h"
#include "kvstore/test_util.h"

namespace flashserve::kvstore {
namespace {

using testing::TempDir;

std::string Bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

void Write(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

using Consumed = base::Result<base::SharedBytes>;

// Writes count files "<prefix><i>" in dir of size_of(i) random bytes each.
struct Files {
  std::vector<std::string> paths, expected;
};
template <class SizeOf>
Files WriteFiles(const TempDir& dir, const char* prefix, int count, uint32_t seed, SizeOf size_of) {
  Files f;
  for (int i = 0; i < count; ++i) {
    f.paths.push_back(dir.Sub(prefix + std::to_string(i)));
    f.expected.push_back(Bytes(size_of(i), seed + static_cast<uint32_t>(i)));
    Write(f.paths.back(), f.expected.back());
  }
  return f;
}

struct Outcome {
  int calls = 0;
  bool ok = false;
  std::string bytes;
  base::ErrorCode code = base::ErrorCode::kOk;
};

// Whether this process can use io_uring (containers often forbid it: then the store reads with
// buffered I/O, which the other kvstore tests cover).
bool RingAvailable() {
  ReadBufferPool buffers(0);
  return FileSystem::Posix()->ReadWholeFilesDirect({}, buffers, [](size_t, Consumed) {});
}
#define SKIP_WITHOUT_RING() \
  if (!RingAvailable()) GTEST_SKIP() << "io_uring is unavailable in this process; the direct reader cannot run"

int OpenDescriptors() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Reads paths in one batch; every index must be consumed exactly once, and every file closed.
std::vector<Outcome> ReadBatch(const std::vector<std::string>& paths, bool alone = true) {
  const int descriptors = alone ? OpenDescriptors() : 0;
  std::vector<Outcome> out(paths.size());
  ReadBufferPool buffers(size_t{64} << 20);
  const bool ran = FileSystem::Posix()->ReadWholeFilesDirect(paths, buffers, [&](size_t i, Consumed b) {
    ASSERT_LT(i, out.size());
    ++out[i].calls;
    out[i].ok = b.ok();
    if (b.ok()) out[i].bytes.assign(**b);
    if (!b.ok()) out[i].code = b.error().code();
  });
  EXPECT_TRUE(ran) << "io_uring unavailable here: the direct path cannot be checked";
  if (alone) {
    EXPECT_EQ(OpenDescriptors(), descriptors) << "a file was left open";
  }
  return out;
}

TEST(DirectReaderTest, EveryFileComesBackWholeOnce) {
  SKIP_WITHOUT_RING();
  TempDir dir;
  // Sizes around the 4 KiB alignment and the 4 MiB group, in an order that fills groups unevenly.
  const std::vector<size_t> sizes = {538790,  1,        4095,           4096,   4097,   0,      (4u << 20) - 4096,
                                     3000000, 4u << 20, (4u << 20) + 1, 9000000, 538790, 538790, 538790,
                                     538790,  538790,   538790,         538790,  538790, 100,    200};
  std::vector<std::string> paths, expected;
  for (size_t i = 0; i < sizes.size(); ++i) {
    paths.push_back(dir.Sub(fmt::format("f{}", i)));
    expected.push_back(Bytes(sizes[i], static_cast<uint32_t>(i)));
    Write(paths.back(), expected.back());
  }
  const std::vector<Outcome> out = ReadBatch(paths);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(out[i].calls, 1) << i;
    EXPECT_TRUE(out[i].ok) << i;
    EXPECT_TRUE(out[i].bytes == expected[i]) << "file " << i << " of " << sizes[i] << " bytes";
  }
}

// The consumer keeps the bytes without a copy: they live in the pool's buffers, stay intact
// while later batches reuse the pool, and go back to it when released.
TEST(DirectReaderTest, KeptBytesStayInThePoolUntilReleased) {
  SKIP_WITHOUT_RING();
  TempDir dir;
  const Files files = WriteFiles(dir, "k", 12, 500, [](int) { return size_t{538790}; });
  const auto& paths = files.paths;  // not structured bindings: the lambdas below capture them
  const auto& expected = files.expected;
  ReadBufferPool pool(size_t{64} << 20);
  std::vector<base::SharedBytes> kept(paths.size());
  auto read = [&](std::vector<base::SharedBytes>* into) {
    return FileSystem::Posix()->ReadWholeFilesDirect(paths, pool, [&](size_t i, Consumed b) {
      ASSERT_TRUE(b.ok()) << b.error().ToString();
      (*into)[i] = *b;
    });
  };
  ASSERT_TRUE(read(&kept));
  EXPECT_GE(pool.stats().used_bytes, static_cast<int64_t>(12 * 538790));
  EXPECT_EQ(pool.stats().heap_allocations, 0);
  for (int round = 0; round < 3; ++round) {  // reads that take and free buffers meanwhile
    std::vector<base::SharedBytes> passing(paths.size());
    ASSERT_TRUE(read(&passing));
  }
  for (size_t i = 0; i < paths.size(); ++i) EXPECT_TRUE(*kept[i] == expected[i]) << i;
  kept.clear();
  EXPECT_EQ(pool.stats().used_bytes, 0);
}

TEST(DirectReaderTest, ManySmallFilesFillManyGroups) {
  SKIP_WITHOUT_RING();
  TempDir dir;
  // More files than a group, the ring or one sort holds.
  const auto [paths, expected] =
      WriteFiles(dir, "s", 150, 1000, [](int i) { return 1000 + 37 * static_cast<size_t>(i); });
  const std::vector<Outcome> out = ReadBatch(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(out[i].calls, 1) << i;
    EXPECT_TRUE(out[i].bytes == expected[i]) << i;
  }
}

// A thread holds few descriptors at a time: files opened and waiting (32 at most) and reads in
// flight (three groups of up to 32 files); a file read in full is closed before it is checked.
TEST(DirectReaderTest, FilesReadInFullAreClosedBeforeTheyAreChecked) {
  SKIP_WITHOUT_RING();
  TempDir dir;
  const Files files = WriteFiles(dir, "d", 400, 2000, [](int) { return size_t{1000}; });
  const auto& paths = files.paths;  // not structured bindings: the lambda below captures them
  const auto& expected = files.expected;
  const int before = OpenDescriptors();
  int most = 0;
  ReadBufferPool pool(size_t{64} << 20);
  const bool ran = FileSystem::Posix()->ReadWholeFilesDirect(paths, pool, [&](size_t i, Consumed b) {
    most = std::max(most, OpenDescriptors() - before);
    ASSERT_TRUE(b.ok()) << b.error().ToString();
    EXPECT_TRUE(**b == expected[i]) << i;
  });
  ASSERT_TRUE(ran);
  EXPECT_LE(most, 32 + 96 + 1) << "descriptors held while files were checked";
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST(DirectReaderTest, ErrorsAreTheSeamsErrors) {
  SKIP_WITHOUT_RING();
  TempDir dir;
  Write(dir.Sub("good"), Bytes(70000, 1));
  ASSERT_EQ(::symlink(dir.Sub("good").c_str(), dir.Sub("link").c_str()), 0);
  ASSERT_EQ(::mkdir(dir.Sub("dir").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo(dir.Sub("fifo").c_str(), 0644), 0);  // must not hang the reader
  const std::vector<std::string> paths = {dir.Sub("missing"), dir.Sub("link"), dir.Sub("good"), dir.Sub("dir"),
                                          dir.Sub("fifo")};
  const std::vector<Outcome> out = ReadBatch(paths);
  for (const Outcome& o : out) EXPECT_EQ(o.calls, 1);
  EXPECT_EQ(out[0].code, base::ErrorCode::kNotFound);
  EXPECT_EQ(out[1].code, base::ErrorCode::kDataLoss);
  EXPECT_TRUE(out[2].ok);
  EXPECT_EQ(out[2].bytes.size(), 70000u);
  EXPECT_EQ(out[3].code, base::ErrorCode::kDataLoss);
  EXPECT_EQ(out[4].code, base::ErrorCode::kDataLoss);
}

TEST(DirectReaderTest, ThreadsReadConcurrently) {
  SKIP_WITHOUT_RING();
  TempDir dir;
  std::vector<std::string> paths, expected;
  for (int i = 0; i < 24; ++i) {
    paths.push_back(dir.Sub(fmt::format("c{}", i)));
    expected.push_back(Bytes(300000 + static_cast<size_t>(i), static_cast<uint32_t>(50 + i)));
    Write(paths.back(), expected.back());
  }
  const int descriptors = OpenDescriptors();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 3; ++round) {
        const std::vector<Outcome> out = ReadBatch(paths, /*alone=*/false);
        for (size_t i = 0; i < paths.size(); ++i) {
          if (out[i].calls != 1 || out[i].bytes != expected[i]) ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(OpenDescriptors(), descriptors) << "a file or a thread's ring was left open";
}

}  // namespace
}  // namespace flashserve::kvstore
