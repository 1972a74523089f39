// Files: whole-file reads, atomic writes (temp file + rename), and read-only memory maps.
// MappedFile is immutable after Open and may be shared by threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashserve::base {

Result<std::string> ReadFileToString(const std::string& path);

// Writes to "<path>.tmp.<pid>" then renames over path: readers never see a partial file.
Status WriteFileAtomic(const std::string& path, std::string_view data);

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> Open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Reads the whole file into memory now, asking for 2 MiB pages first (MADV_HUGEPAGE: where
  // the kernel and file system have large folios, readahead then fills the page cache with
  // 2 MiB folios and the mapping maps them whole, which streaming reads of weights need; the
  // mapping starts on a 2 MiB boundary). MADV_POPULATE_READ, or one read per 4 KiB page on
  // kernels before 5.14. Pages already cached keep their size. Returns the bytes this
  // mapping now maps with 2 MiB entries (/proc/self/smaps; 0 where unknown).
  int64_t Preload() const;
  // The parts of Preload: MADV_HUGEPAGE over the whole mapping (before anything touches it, so
  // that faults and readahead bring 2 MiB folios), and reading [offset, offset + bytes) in
  // (rounded out to 4 KiB pages).
  void AdviseHugePages() const;
  void PopulateRange(size_t offset, size_t bytes) const;
  // Drops this mapping's pages inside [offset, offset + bytes) (rounded in to pages):
  // they leave the process's resident set, the page cache keeps them while memory allows, and a
  // later read faults them back. For ranges whose contents are served from a copy.
  void ReleaseRange(size_t offset, size_t bytes) const;
  // Bytes of this mapping mapped with 2 MiB entries (FilePmdMapped in /proc/self/smaps).
  int64_t HugeMappedBytes() const;

 private:
  void Reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace flashserve::base
