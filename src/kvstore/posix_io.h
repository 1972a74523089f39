// POSIX helpers shared by the file-system seam's implementation (file_system.cc) and its batched
// reader (direct_reader.cc): errno -> Error mapping, opening a regular file safely, full preads.
// Plain functions, any thread; ReadWholeFilesWithRing keeps one ring per calling thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"
#include "kvstore/file_system.h"

namespace flashserve::kvstore::internal {

// ENOENT = kNotFound; ENOSPC, EDQUOT, EFBIG = kResourceExhausted; others kIoError.
base::Error ErrnoError(int err, std::string_view what, const std::string& path);

struct OpenFile {
  int fd = -1;  // owned by the caller
  int64_t size = 0;
  uint64_t inode = 0;
  bool direct = false;  // O_DIRECT is set
};
// Object paths are <root>/<fingerprint>/ab/cd/<name>: kDataLoss when one of the three
// directories above the file is a symbolic link (planted there, it would lead reads, writes
// and deletes outside the root; the index scan never descends into one either). A missing
// directory is no error here (the operation itself reports it).
base::Status CheckNoLinkedDirectories(const std::string& path);

// Opens a regular file read-only without following a symlink (neither the file nor, per
// CheckNoLinkedDirectories, its directories) and without blocking on a FIFO: missing =
// kNotFound, a symlink or anything but a regular file = kDataLoss. try_direct:
// set O_DIRECT where the file system allows it (OpenFile::direct says whether it did).
base::Result<OpenFile> OpenRegularFile(const std::string& path, bool try_direct);

// Reads exactly n bytes at offset (restarting after EINTR and short reads); end of file first
// = kDataLoss.
base::Status PreadAll(int fd, int64_t offset, size_t n, char* out, const std::string& path);

// FileSystem::Posix()'s ReadWholeFilesDirect: io_uring batches (direct_reader.cc). Returns
// false, having consumed nothing, where io_uring is unavailable in this process (old kernel,
// seccomp).
bool ReadWholeFilesWithRing(std::span<const std::string> paths, ReadBufferPool& buffers,
                            const WholeFileConsumer& consume);

}  // namespace flashserve::kvstore::internal
