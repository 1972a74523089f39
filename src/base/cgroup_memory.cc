// Control-group memory limits (base/cgroup_memory.h).
#include "base/cgroup_memory.h"

#include <algorithm>
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

// The value of `key` in a flat "key value" file (memory.stat); -1 where absent.
int64_t ReadStat(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string name;
  long long v = 0;
  while (f >> name >> v)
    if (name == key) return static_cast<int64_t>(v);
  return -1;
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
    room = MinRoom(room, Room(ReadBytes(dir + "/memory.max"), ReadBytes(dir + "/memory.current"),
                              ReadStat(dir + "/memory.stat", "file")));
    if (path == "/" || path.empty()) return room;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// cgroup v1 memory controller: its stat file gives the limit over the ancestors too.
int64_t V1Room(const std::string& mount_root, const std::string& path) {
  const std::string dir = mount_root + "/memory" + (path == "/" ? "" : path);
  int64_t limit = ReadStat(dir + "/memory.stat", "hierarchical_memory_limit");
  if (limit < 0) limit = ReadBytes(dir + "/memory.limit_in_bytes");
  int64_t cache = ReadStat(dir + "/memory.stat", "total_cache");
  if (cache < 0) cache = ReadStat(dir + "/memory.stat", "cache");
  return Room(limit, ReadBytes(dir + "/memory.usage_in_bytes"), cache);
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
