// Control-group memory limits (base/cgroup_memory.h).
#include "base/cgroup_memory.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace flashserve::base {
namespace {

// Limits at or above this (v1 writes 2^63 rounded down to a page for "none") mean no limit.
constexpr int64_t kNoLimit = int64_t{1} << 60;

// The first token of a file as a byte count; -1 where it is missing, "max" or not a number.
int64_t ReadBytes(const std::string& path) {
  std::ifstream f(path);
  std::string token;
  if (!(f >> token)) return -1;
  long long v = 0;
  char extra = 0;
  if (std::sscanf(token.c_str(), "%lld%c", &v, &extra) != 1 || v < 0) return -1;
  return static_cast<int64_t>(v);
}

// The values of `keys` in a flat "key value" file (memory.stat), in that order; -1 where absent.
template <size_t N>
std::array<int64_t, N> ReadStats(const std::string& path, const std::array<const char*, N>& keys) {
  std::array<int64_t, N> values;
  values.fill(-1);
  std::ifstream f(path);
  std::string name;
  long long v = 0;
  while (f >> name >> v)
    for (size_t i = 0; i < N; ++i)
      if (name == keys[i]) values[i] = static_cast<int64_t>(v);
  return values;
}

// Room under one limit: limit - (usage - cache), or -1 where unlimited or unreadable.
int64_t Room(int64_t limit, int64_t usage, int64_t cache) {
  if (limit < 0 || limit >= kNoLimit || usage < 0) return -1;
  const int64_t pinned = usage - std::max<int64_t>(0, std::min(cache, usage));
  return std::max<int64_t>(0, limit - pinned);
}

int64_t MinRoom(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : std::min(a, b); }

// cgroup v2: the group's directory and every ancestor up to the mount root.
int64_t V2Room(const std::string& mount_root, std::string path) {
  int64_t room = -1;
  for (;;) {
    const std::string dir = mount_root + (path == "/" ? "" : path);
    const int64_t file = ReadStats<1>(dir + "/memory.stat", {"file"})[0];
    room = MinRoom(room, Room(ReadBytes(dir + "/memory.max"), ReadBytes(dir + "/memory.current"), file));
    if (path == "/" || path.empty()) return room;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// cgroup v1 memory controller: its stat file gives the limit over the ancestors too.
int64_t V1Room(const std::string& mount_root, const std::string& path) {
  const std::string dir = mount_root + "/memory" + (path == "/" ? "" : path);
  const auto [hierarchical, total_cache, cache] =
      ReadStats<3>(dir + "/memory.stat", {"hierarchical_memory_limit", "total_cache", "cache"});
  const int64_t limit = hierarchical >= 0 ? hierarchical : ReadBytes(dir + "/memory.limit_in_bytes");
  return Room(limit, ReadBytes(dir + "/memory.usage_in_bytes"), total_cache >= 0 ? total_cache : cache);
}

}  // namespace

int64_t CgroupAvailableBytes(const std::string& self_cgroup, const std::string& mount_root) {
  std::istringstream lines(self_cgroup);
  std::string line, v2_path;
  while (std::getline(lines, line)) {
    // "hierarchy-id:controllers:path"; the path may itself contain ':'.
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      v2_path = path;
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") return V1Room(mount_root, path);  // the memory controller is on v1
  }
  return v2_path.empty() ? -1 : V2Room(mount_root, v2_path);
}

int64_t ProcessCgroupAvailableBytes() {
  std::ifstream f("/proc/self/cgroup");
  std::stringstream text;
  text << f.rdbuf();
  return CgroupAvailableBytes(text.str(), "/sys/fs/cgroup");
}

}  // namespace flashserve::base
