#include "base/file_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

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

TEST(FileUtilTest, MissingFileIsNotFound) {
  auto r = ReadFileToString("/nonexistent/flashserve/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(MappedFile::Open("/nonexistent/flashserve/x").error().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(WriteFileAtomic("/nonexistent/flashserve/x", "y").ok());
}

}  // namespace
}  // namespace flashserve::base
