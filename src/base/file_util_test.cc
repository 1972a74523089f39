#include "base/file_util.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace flashserve::base {
namespace {

TEST(FileUtilTest, AtomicWriteThenReadAndMap) {
  std::string dir = std::filesystem::temp_directory_path() / ("fs_file_util_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = dir + "/a.bin";
  std::string payload(100000, 'x');
  payload[5] = '\0';
  ASSERT_TRUE(WriteFileAtomic(path, payload).ok());
  EXPECT_EQ(ReadFileToString(path).value(), payload);
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok());
  ASSERT_EQ(mapped->size(), payload.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()), payload);
  // No temporary files are left behind.
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

// Pages of [p, p + n) in memory, by mincore.
int64_t ResidentPages(const uint8_t* p, size_t n) {
  std::vector<unsigned char> vec((n + 4095) / 4096);
  if (::mincore(const_cast<uint8_t*>(p), n, vec.data()) != 0) return -1;
  int64_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

TEST(FileUtilTest, MappingsStartOnAHugePageAndPreloadReadsTheWholeFile) {
  std::string dir = std::filesystem::temp_directory_path() / ("fs_file_util_pre_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/w.bin";
  std::string payload(size_t{6} << 20, '\0');
  for (size_t i = 0; i < payload.size(); i += 4096) payload[i] = static_cast<char>(i / 4096);
  ASSERT_TRUE(WriteFileAtomic(path, payload).ok());  // fsynced: its pages are clean
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mapped->data()) % (uintptr_t{2} << 20), 0u);
  const int64_t pages = static_cast<int64_t>(payload.size() / 4096);
  const int64_t before = ResidentPages(mapped->data(), mapped->size());
  const int64_t huge = mapped->Preload();
  EXPECT_EQ(ResidentPages(mapped->data(), mapped->size()), pages) << "before: " << before;
  // Where the advice dropped the cached pages (not tmpfs, whose pages are the file), Preload
  // had them to read back.
  if (before == pages) std::printf("note: %s kept the file's pages; the check of the reads is vacuous\n", dir.c_str());
  EXPECT_GE(huge, 0);
  EXPECT_LE(huge, static_cast<int64_t>(mapped->size()));
  EXPECT_EQ(huge % (int64_t{2} << 20), 0);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(mapped->data()), mapped->size()), payload);
  EXPECT_EQ(MappedFile().Preload(), 0);  // nothing mapped: nothing to do
  std::filesystem::remove_all(dir);
}

TEST(FileUtilTest, MissingFileIsNotFound) {
  auto r = ReadFileToString("/nonexistent/flashserve/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(MappedFile::Open("/nonexistent/flashserve/x").error().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(WriteFileAtomic("/nonexistent/flashserve/x", "y").ok());
}

}  // namespace
}  // namespace flashserve::base
