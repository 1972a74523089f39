// The memory limit a process's control group puts on it (cgroup v2 `memory.max` over the group
// and its ancestors, or cgroup v1 `hierarchical_memory_limit`), as room left before the group
// must reclaim its own memory. Containers see the host's /proc/meminfo, so the available memory
// there overstates what a limited container can keep resident. Pure reads of text files; any
// thread.
#pragma once

#include <cstdint>
#include <string>

namespace flashserve::base {

// Bytes the group can still fill: for each limited level, limit - (usage - page cache), the
// page cache being reclaimable; the lowest over the levels. -1 where no limit applies or the
// files cannot be read. `self_cgroup` is the text of /proc/self/cgroup, `mount_root` where the
// hierarchies are mounted (/sys/fs/cgroup: v2 there, v1 memory controller under memory/).
int64_t CgroupAvailableBytes(const std::string& self_cgroup, const std::string& mount_root);

// CgroupAvailableBytes for this process (/proc/self/cgroup, /sys/fs/cgroup).
int64_t ProcessCgroupAvailableBytes();

}  // namespace flashserve::base
