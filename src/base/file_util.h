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

 private:
  void Reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace flashserve::base
