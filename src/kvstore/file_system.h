// The file-system seam under the KV store's directory tiers and tools: atomic whole-object writes
// (temporary file + rename), positioned reads, batches of direct whole-file reads, listing,
// removal, and moving a file aside and back (checked deletes in shared directories).
// FileSystem::Posix() is the real one; tests wrap it to inject faults (disk full, read errors,
// paused reads). Implementations are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/shared_bytes.h"
#include "kvstore/buffer_pool.h"

namespace flashserve::kvstore {

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  virtual int64_t size() const = 0;
  // Reads exactly n bytes at offset; a short read (the file shrank) is kDataLoss.
  virtual base::Status ReadAt(int64_t offset, size_t n, char* out) = 0;
  // Hint: the whole file will be read soon (start the I/O now, in large requests).
  virtual void WillReadAll() {}
  // Hint: only its first bytes will be read (no readahead beyond them).
  virtual void WillReadHeaderOnly() {}
  // Drops the file's clean pages from the page cache (after reading it).
  virtual void DropCached() {}
};

enum class EntryType : uint8_t { kFile, kDirectory, kOther };  // kOther: symlinks, sockets, ...

struct DirEntry {
  std::string name;
  EntryType type = EntryType::kOther;
};

// Called once per file of a ReadWholeFilesDirect batch with its index and its bytes (shared:
// the consumer may keep them, or slices of them, without a copy), or why it could not be read.
using WholeFileConsumer = std::function<void(size_t index, base::Result<base::SharedBytes> bytes)>;

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Writes header then payload to "<path>.tmp.<unique>" and renames it over path, creating missing
  // parent directories. On failure nothing is left behind. No space / quota / file too large =
  // kResourceExhausted, other failures kIoError. No fsync: a torn object after a crash fails its
  // checksum and is treated as corrupt.
  virtual base::Status WriteAtomic(const std::string& path, std::string_view header, std::string_view payload) = 0;
  // Opens a regular file read-only without following a final symlink. Missing = kNotFound; a
  // symlink or anything but a regular file = kDataLoss.
  virtual base::Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) = 0;
  // Reads whole files (each as OpenForRead + ReadAt of all of it: same errors) as one batch with
  // direct I/O into buffers from `buffers` and calls consume once per path, in any order, on the
  // calling thread. POSIX: io_uring, O_DIRECT where the file system allows it, so reads of files
  // adjacent on disk merge into large device requests and bypass the page cache. Returns false,
  // having consumed nothing, where there is no such path (this default, or io_uring
  // unavailable): the caller then reads the files itself.
  virtual bool ReadWholeFilesDirect(std::span<const std::string> paths, ReadBufferPool& buffers,
                                    const WholeFileConsumer& consume) {
    return false;
  }
  // Removes a file (never a directory); a missing file is OK.
  virtual base::Status Remove(const std::string& path) = 0;
  // Renames the file at path to a new temporary name beside it ("<path>.tmp.aside-<now_unix>.
  // <unique>", the time so that IsStaleTemporary does not judge it by its old mtime) and returns
  // that name: whichever file path held at that instant, and only it. Missing = kNotFound.
  virtual base::Result<std::string> MoveAside(const std::string& path, int64_t now_unix) = 0;
  // Puts a file moved aside back at path, unless path exists again (a newer file took its place:
  // kAlreadyExists, `aside` left as it is). Where a hard link cannot be made (no hard links on
  // this file system; another user's file under fs.protected_hardlinks), a plain rename, which
  // replaces such a newer file: workers sharing a directory should run as one user.
  virtual base::Status PutBack(const std::string& aside, const std::string& path) = 0;
  virtual base::Status CreateDirs(const std::string& path) = 0;
  // Entries of a directory without "." and ".."; symlinks are kOther. Missing = kNotFound.
  virtual base::Result<std::vector<DirEntry>> List(const std::string& dir) = 0;
  // Last modification time in Unix seconds, without following symlinks.
  virtual base::Result<int64_t> ModifiedTime(const std::string& path) = 0;

  // The process-wide POSIX implementation.
  static FileSystem* Posix();
};

// True for names written by WriteAtomic before their rename ("<name>.tmp.<unique>") and for
// files moved aside by MoveAside.
bool IsTemporaryName(std::string_view name);

// True for a temporary file a crashed writer or checker left behind: untouched for over an hour
// by its modification time and, for a file moved aside, by the time in its name (unless that
// lies over an hour ahead of now_unix: a bogus name does not keep a file forever).
bool IsStaleTemporary(FileSystem& fs, const std::string& path, int64_t now_unix);

}  // namespace flashserve::kvstore
