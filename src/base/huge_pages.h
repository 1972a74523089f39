// HugePageBuffer: anonymous memory in 2 MiB pages where the kernel's transparent huge pages
// allow it (madvise mode), for hot read-only data that would otherwise live in 4 KiB pages of a
// file mapping (file mappings get 2 MiB pages only from kernels and file systems with large
// page-cache folios, read in after MADV_HUGEPAGE: base::MappedFile::Preload). Owns the
// mapping; movable, not copyable. Any thread. Also the machine's available memory and the
// kernel's per-mapping counts (smaps) that say how much of a mapping is in huge pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/aligned_vector.h"
#include "base/result.h"

namespace flashserve::base {

// Replaces `buffer` with `size` zeros, its 2 MiB-aligned interior advised into huge pages before
// first touch (scratch that kernels stream: fewer TLB misses). A hint; fine where refused.
void GrowInHugePages(AlignedVector<float>& buffer, size_t size);

// Whether the kernel offers transparent huge pages for madvised memory (THP "always" or
// "madvise"); false where it says "never" or cannot be read.
bool TransparentHugePagesAvailable();

// MemAvailable of /proc/meminfo in bytes, lowered to the room the process's control group
// leaves (base/cgroup_memory.h) where it has a memory limit; 0 where neither can be read.
int64_t AvailableMemoryBytes();

// The process's resident set now and at its peak (VmRSS, VmHWM of /proc/self/status), in
// bytes; -1 where they cannot be read.
struct ResidentBytes {
  int64_t now = -1, peak = -1;
};
ResidentBytes ProcessResidentBytes();

// The sum of one /proc/self/smaps field ("AnonHugePages", "FilePmdMapped", ...) over the
// mappings that start in [begin, begin + bytes), in bytes; -1 where none is found.
int64_t MappedFieldBytes(const void* begin, size_t bytes, const char* field);

class HugePageBuffer {
 public:
  // Maps `bytes` (rounded up to 2 MiB) with MADV_HUGEPAGE and copies `data` into it.
  static Result<HugePageBuffer> CopyOf(const void* data, size_t bytes);
  // The same, filled by `fill(dst)` (which writes the `bytes` bytes) instead of a copy.
  static Result<HugePageBuffer> Filled(size_t bytes, const std::function<void(uint8_t*)>& fill);
  HugePageBuffer() = default;
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes of the mapping the kernel backs with huge pages (AnonHugePages of /proc/self/smaps;
  // -1 where that cannot be read).
  int64_t HugeBytes() const;

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;     // bytes asked for
  size_t mapped_ = 0;   // bytes mapped
};

}  // namespace flashserve::base
