#include "base/cgroup_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace flashserve::base {
namespace {

namespace fs = std::filesystem;

class CgroupMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("fs_cgroup_" + std::to_string(getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  int64_t Room(const std::string& self) { return CgroupAvailableBytes(self, root_); }
  std::string root_;
};

constexpr int64_t kMiB = 1 << 20;

TEST_F(CgroupMemoryTest, V2TakesTheTightestLevelAndCountsPageCacheAsRoom) {
  const std::string self = "0::/pod/app\n";
  Write("memory.max", "max\n");  // the root: no limit
  Write("pod/memory.max", std::to_string(1000 * kMiB) + "\n");
  Write("pod/memory.current", std::to_string(700 * kMiB) + "\n");
  Write("pod/memory.stat", "anon 500\nfile " + std::to_string(200 * kMiB) + "\n");
  Write("pod/app/memory.max", "max\n");
  Write("pod/app/memory.current", std::to_string(600 * kMiB) + "\n");
  Write("pod/app/memory.stat", "file 0\n");
  // pod: 1000 - (700 - 200) = 500 MiB; the app level has no limit.
  EXPECT_EQ(Room(self), 500 * kMiB);
  // A tighter limit on the leaf wins: 800 - (600 - 0) = 200 MiB.
  Write("pod/app/memory.max", std::to_string(800 * kMiB) + "\n");
  EXPECT_EQ(Room(self), 200 * kMiB);
  // Usage above a limit leaves no room (never negative).
  Write("pod/app/memory.current", std::to_string(900 * kMiB) + "\n");
  EXPECT_EQ(Room(self), 0);
}

TEST_F(CgroupMemoryTest, V2WithoutLimitsOrFilesIsUnlimited) {
  EXPECT_EQ(Room("0::/a/b\n"), -1);  // nothing mounted there
  Write("memory.max", "max\n");
  Write("a/memory.max", "max\n");
  Write("a/b/memory.max", "max\n");
  EXPECT_EQ(Room("0::/a/b\n"), -1);
  Write("a/memory.max", "not-a-number\n");
  EXPECT_EQ(Room("0::/a/b\n"), -1);
  EXPECT_EQ(Room(""), -1);
  EXPECT_EQ(Room("garbage\n"), -1);
}

TEST_F(CgroupMemoryTest, V1MemoryControllerUsesTheHierarchicalLimit) {
  // A hybrid layout: v1 memory controller (this machine's kind), a v2 line without it.
  const std::string self = "4:memory:/process_api/x1\n3:cpuset:/\n0::/\n";
  Write("memory/process_api/x1/memory.limit_in_bytes", std::to_string(4096 * kMiB) + "\n");
  Write("memory/process_api/x1/memory.usage_in_bytes", std::to_string(1500 * kMiB) + "\n");
  Write("memory/process_api/x1/memory.stat", "cache " + std::to_string(1000 * kMiB) +
                                                 "\nrss 7\nhierarchical_memory_limit " +
                                                 std::to_string(2048 * kMiB) + "\ntotal_cache " +
                                                 std::to_string(1200 * kMiB) + "\n");
  // The ancestors' 2048 MiB, not the group's own 4096: 2048 - (1500 - 1200) = 1748 MiB.
  EXPECT_EQ(Room(self), 1748 * kMiB);
  // v1 writes "no limit" as 2^63 rounded down to a page.
  Write("memory/process_api/x1/memory.stat", "hierarchical_memory_limit 9223372036854771712\ntotal_cache 0\n");
  Write("memory/process_api/x1/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(Room(self), -1);
  // Controllers listed together, and a path that contains ':'.
  Write("memory/a:b/memory.limit_in_bytes", std::to_string(100 * kMiB) + "\n");
  Write("memory/a:b/memory.usage_in_bytes", std::to_string(10 * kMiB) + "\n");
  Write("memory/a:b/memory.stat", "cache 0\n");
  EXPECT_EQ(Room("5:cpu,memory:/a:b\n"), 90 * kMiB);
}

}  // namespace
}  // namespace flashserve::base
