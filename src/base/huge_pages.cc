// HugePageBuffer (base/huge_pages.h).
#include "base/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "base/cgroup_memory.h"

namespace flashserve::base {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void GrowInHugePages(AlignedVector<float>& buffer, size_t size) {
  AlignedVector<float> grown;
  grown.reserve(size);  // untouched: the advice decides the page size
  const uintptr_t start = (reinterpret_cast<uintptr_t>(grown.data()) + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(grown.data() + size) & ~(uintptr_t{kHugePage} - 1);
  if (end > start) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
  grown.resize(size);
  buffer.swap(grown);
}

bool TransparentHugePagesAvailable() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return f && std::getline(f, line) && line.find("[never]") == std::string::npos;
}

int64_t AvailableMemoryBytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  long long kib = 0;
  int64_t available = 0;
  while (std::getline(f, line))
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) {
      available = static_cast<int64_t>(kib) * 1024;
      break;
    }
  const int64_t group = ProcessCgroupAvailableBytes();
  if (group < 0) return available;
  return available > 0 ? std::min(available, group) : group;
}

Result<HugePageBuffer> HugePageBuffer::CopyOf(const void* data, size_t bytes) {
  return Filled(bytes, [&](uint8_t* dst) { std::memcpy(dst, data, bytes); });
}

Result<HugePageBuffer> HugePageBuffer::Filled(size_t bytes, const std::function<void(uint8_t*)>& fill) {
  HugePageBuffer b;
  if (bytes == 0) return b;
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Over-map by one huge page so that the used range can start on a 2 MiB boundary.
  void* raw = ::mmap(nullptr, mapped + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return MakeError(ErrorCode::kResourceExhausted, "mapping " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  const uintptr_t start = (reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  const size_t head = start - reinterpret_cast<uintptr_t>(raw);
  if (head > 0) ::munmap(raw, head);
  if (kHugePage - head > 0) ::munmap(reinterpret_cast<void*>(start + mapped), kHugePage - head);
  ::madvise(reinterpret_cast<void*>(start), mapped, MADV_HUGEPAGE);  // a hint: fine if refused
  b.data_ = reinterpret_cast<uint8_t*>(start);
  b.size_ = bytes;
  b.mapped_ = mapped;
  fill(b.data_);
  ::mprotect(b.data_, mapped, PROT_READ);
  return b;
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

int64_t MappedFieldBytes(const void* begin, size_t bytes, const char* field) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return -1;
  const uintptr_t lo_bound = reinterpret_cast<uintptr_t>(begin);
  const std::string prefix = std::string(field) + ": %lld kB";
  std::string line;
  bool inside = false, found = false;
  int64_t kib = 0;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2) {  // a mapping's first line
      inside = lo >= lo_bound && lo < lo_bound + bytes;
      continue;
    }
    long long v = 0;
    if (inside && std::sscanf(line.c_str(), prefix.c_str(), &v) == 1) {
      kib += v;
      found = true;
    }
  }
  return found ? kib * 1024 : -1;
}

ResidentBytes ProcessResidentBytes() {
  std::ifstream status("/proc/self/status");
  ResidentBytes r;
  std::string line;
  while (std::getline(status, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kib) == 1) r.now = kib * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %lld kB", &kib) == 1) r.peak = kib * 1024;
  }
  return r;
}

int64_t HugePageBuffer::HugeBytes() const {
  if (data_ == nullptr) return 0;
  return MappedFieldBytes(data_, size_, "AnonHugePages");
}

}  // namespace flashserve::base
