// File helpers (base/file_util.h).
#include "base/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/huge_pages.h"

namespace flashserve::base {
namespace {
Error ErrnoError(const std::string& what, const std::string& path) {
  return Error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
               what + " " + path + ": " + std::strerror(errno));
}
}  // namespace

Result<std::string> ReadFileToString(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = ErrnoError("cannot read", path);
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = ErrnoError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Error e = ErrnoError("cannot flush", tmp);
    ::unlink(tmp.c_str());
    return e;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = ErrnoError("cannot rename into", path);
    ::unlink(tmp.c_str());
    return e;
  }
  return Status::Ok();
}

namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

// mmap of the whole file, read-only and shared, starting on a 2 MiB boundary (so that 2 MiB
// folios of the page cache can be mapped whole): a reservation one huge page larger, the
// file mapped over its aligned part, the slack returned.
void* MapAligned(int fd, size_t size) {
  void* raw = ::mmap(nullptr, size + kHugePageBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return MAP_FAILED;
  const uintptr_t r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (r + kHugePageBytes - 1) & ~uintptr_t{kHugePageBytes - 1};
  void* p = ::mmap(reinterpret_cast<void*>(aligned), size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    const int saved = errno;
    ::munmap(raw, size + kHugePageBytes);
    errno = saved;
    return MAP_FAILED;
  }
  const size_t mapped_end = (aligned + size + 4095) & ~uintptr_t{4095};
  if (aligned > r) ::munmap(raw, aligned - r);
  if (r + size + kHugePageBytes > mapped_end) ::munmap(reinterpret_cast<void*>(mapped_end), r + size + kHugePageBytes - mapped_end);
  return p;
}

}  // namespace

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = other.data_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::Reset() {
  if (data_ != nullptr && size_ > 0) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Error e = ErrnoError("cannot stat", path);
    ::close(fd);
    return e;
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void* p = MapAligned(fd, file.size_);
    if (p == MAP_FAILED) {
      Error e = ErrnoError("cannot mmap", path);
      ::close(fd);
      file.size_ = 0;
      return e;
    }
    file.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return file;
}

int64_t MappedFile::Preload() const {
  AdviseHugePages();
  PopulateRange(0, size_);
  return HugeMappedBytes();
}

void MappedFile::AdviseHugePages() const {
  if (size_ > 0) (void)::madvise(const_cast<uint8_t*>(data_), size_, MADV_HUGEPAGE);  // advice only
}

namespace {
size_t PageBytes() {
  static const size_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}
}  // namespace

void MappedFile::PopulateRange(size_t offset, size_t bytes) const {
  offset = std::min(offset, size_);
  bytes = std::min(bytes, size_ - offset);
  if (bytes == 0) return;
  const size_t page = PageBytes();
  const size_t begin = offset / page * page;
  const size_t end = std::min(size_, (offset + bytes + page - 1) / page * page);
  void* start = const_cast<uint8_t*>(data_ + begin);
#ifdef MADV_POPULATE_READ
  // EINVAL: a kernel before 5.14. Any other failure (an I/O error) is left to the reads that
  // need those pages, as without preloading: touching them here could raise SIGBUS.
  const bool unsupported = ::madvise(start, end - begin, MADV_POPULATE_READ) != 0 && errno == EINVAL;
#else
  const bool unsupported = true;
#endif
  if (unsupported) {
    volatile uint8_t sink = 0;
    for (size_t i = begin; i < end; i += page) sink = sink + data_[i];
    sink = sink + data_[end - 1];
  }
}

void MappedFile::ReleaseRange(size_t offset, size_t bytes) const {
  offset = std::min(offset, size_);
  bytes = std::min(bytes, size_ - offset);
  const size_t page = PageBytes();
  const size_t begin = (offset + page - 1) / page * page;
  const size_t end = (offset + bytes) / page * page;
  if (end > begin) (void)::madvise(const_cast<uint8_t*>(data_ + begin), end - begin, MADV_DONTNEED);
}


int64_t MappedFile::HugeMappedBytes() const {
  if (size_ == 0) return 0;
  return std::max<int64_t>(0, MappedFieldBytes(data_, size_, "FilePmdMapped"));
}

}  // namespace flashserve::base
