// POSIX file-system seam (kvstore/file_system.h).
#include "kvstore/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <random>

#include "fmt/format.h"
#include "kvstore/posix_io.h"

namespace flashserve::kvstore {
namespace {

using base::Error;
using base::ErrorCode;
using base::Result;
using base::Status;

constexpr std::string_view kTempMarker = ".tmp.";
constexpr std::string_view kAsideTag = "aside-";  // after kTempMarker: "aside-<unix seconds>."
constexpr int64_t kStaleTempSeconds = 3600;       // a temporary file this old belongs to a crashed process

using internal::ErrnoError;

class PosixFile final : public ReadableFile {
 public:
  PosixFile(int fd, int64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  ~PosixFile() override { ::close(fd_); }
  int64_t size() const override { return size_; }
  void WillReadAll() override { ::posix_fadvise(fd_, 0, size_, POSIX_FADV_WILLNEED); }
  void WillReadHeaderOnly() override { ::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM); }
  void DropCached() override { ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED); }
  Status ReadAt(int64_t offset, size_t n, char* out) override { return internal::PreadAll(fd_, offset, n, out, path_); }

 private:
  int fd_;
  int64_t size_;
  std::string path_;
};

// Writes every byte of the two parts (writev, restarted after short writes).
Status WriteAll(int fd, std::string_view a, std::string_view b, const std::string& path) {
  size_t offset = 0;
  const size_t total = a.size() + b.size();
  while (offset < total) {
    iovec iov[2];
    int n = 0;
    if (offset < a.size()) iov[n++] = {const_cast<char*>(a.data() + offset), a.size() - offset};
    const size_t b_offset = offset > a.size() ? offset - a.size() : 0;
    if (b_offset < b.size()) iov[n++] = {const_cast<char*>(b.data() + b_offset), b.size() - b_offset};
    ssize_t w = ::writev(fd, iov, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ErrnoError(errno, "cannot write", path);
    offset += static_cast<size_t>(w);
  }
  return Status::Ok();
}

class PosixFileSystem final : public FileSystem {
 public:
  PosixFileSystem() {
    std::random_device rd;  // distinguishes processes on different hosts sharing one directory
    unique_ = fmt::format("{:x}{:08x}", static_cast<unsigned>(::getpid()), rd());
  }

  Status WriteAtomic(const std::string& path, std::string_view header, std::string_view payload) override {
    FS_RETURN_IF_ERROR(internal::CheckNoLinkedDirectories(path));
    const std::string tmp = fmt::format("{}{}{}.{}", path, kTempMarker, unique_, sequence_.fetch_add(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) {
      const size_t slash = path.rfind('/');
      if (slash != std::string::npos) FS_RETURN_IF_ERROR(CreateDirs(path.substr(0, slash)));
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0) return ErrnoError(errno, "cannot create", tmp);
    Status written = WriteAll(fd, header, payload, tmp);
    if (::close(fd) != 0 && written.ok()) written = ErrnoError(errno, "cannot close", tmp);
    if (written.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      written = ErrnoError(errno, "cannot rename into", path);
    }
    if (!written.ok()) ::unlink(tmp.c_str());
    return written;
  }

  Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    FS_ASSIGN_OR_RETURN(internal::OpenFile f, internal::OpenRegularFile(path, /*try_direct=*/false));
    return std::unique_ptr<ReadableFile>(new PosixFile(f.fd, f.size, path));
  }

  bool ReadWholeFilesDirect(std::span<const std::string> paths, ReadBufferPool& buffers,
                            const WholeFileConsumer& consume) override {
    return internal::ReadWholeFilesWithRing(paths, buffers, consume);
  }

  Status Remove(const std::string& path) override {
    FS_RETURN_IF_ERROR(internal::CheckNoLinkedDirectories(path));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError(errno, "cannot remove", path);
    return Status::Ok();
  }

  Result<std::string> MoveAside(const std::string& path, int64_t now_unix) override {
    FS_RETURN_IF_ERROR(internal::CheckNoLinkedDirectories(path));
    // A rename keeps the file's old modification time: the name says when it was moved.
    std::string aside =
        fmt::format("{}{}{}{}.{}.{}", path, kTempMarker, kAsideTag, now_unix, unique_, sequence_.fetch_add(1));
    if (::rename(path.c_str(), aside.c_str()) != 0) return ErrnoError(errno, "cannot move aside", path);
    return aside;
  }

  Status PutBack(const std::string& aside, const std::string& path) override {
    FS_RETURN_IF_ERROR(internal::CheckNoLinkedDirectories(path));
    if (::link(aside.c_str(), path.c_str()) == 0) {
      ::unlink(aside.c_str());
      return Status::Ok();
    }
    if (errno == EEXIST) return ErrnoError(errno, "cannot put back", path);
    if (::rename(aside.c_str(), path.c_str()) != 0) return ErrnoError(errno, "cannot put back", path);
    return Status::Ok();  // no hard links here (EPERM, ENOTSUP, ...): renamed
  }

  Status CreateDirs(const std::string& path) override {
    if (path.empty()) return Status::Ok();
    if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
    if (errno != ENOENT) return ErrnoError(errno, "cannot create directory", path);
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) return ErrnoError(ENOENT, "cannot create directory", path);
    FS_RETURN_IF_ERROR(CreateDirs(path.substr(0, slash)));
    if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
    return ErrnoError(errno, "cannot create directory", path);
  }

  Result<std::vector<DirEntry>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoError(errno, "cannot list", dir);
    std::vector<DirEntry> out;
    while (dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      unsigned char type = e->d_type;
      if (type == DT_UNKNOWN) {  // some file systems (XFS without ftype, NFS) do not fill d_type
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
          type = S_ISREG(st.st_mode) ? DT_REG : S_ISDIR(st.st_mode) ? DT_DIR : DT_LNK;
        }
      }
      out.push_back({std::string(name), type == DT_REG   ? EntryType::kFile
                                        : type == DT_DIR ? EntryType::kDirectory
                                                         : EntryType::kOther});
    }
    ::closedir(d);
    return out;
  }

  Result<int64_t> ModifiedTime(const std::string& path) override {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return ErrnoError(errno, "cannot stat", path);
    return static_cast<int64_t>(st.st_mtime);
  }

 private:
  std::string unique_;
  std::atomic<uint64_t> sequence_{0};
};

}  // namespace

namespace internal {

Error ErrnoError(int err, std::string_view what, const std::string& path) {
  ErrorCode code = ErrorCode::kIoError;
  if (err == ENOENT) code = ErrorCode::kNotFound;
  if (err == EEXIST) code = ErrorCode::kAlreadyExists;
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) code = ErrorCode::kResourceExhausted;
  return Error(code, fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

Status CheckNoLinkedDirectories(const std::string& path) {
  std::string dir = path;
  for (int level = 0; level < 3; ++level) {
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    dir.resize(slash);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) return Error(ErrorCode::kDataLoss, "a symbolic link among the store's folders: " + dir);
  }
  return Status::Ok();
}

Result<OpenFile> OpenRegularFile(const std::string& path, bool try_direct) {
  FS_RETURN_IF_ERROR(CheckNoLinkedDirectories(path));
  // O_NONBLOCK: opening a FIFO planted in a shared directory must not hang the reader. It is
  // cleared once the file is known to be regular (io_uring would not wait for uncached data),
  // in the same call that sets O_DIRECT where asked for and allowed.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ELOOP) return Error(ErrorCode::kDataLoss, "a symbolic link, not an object: " + path);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Error e = ErrnoError(errno, "cannot stat", path);
    ::close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(ErrorCode::kDataLoss, "not a regular file: " + path);
  }
  const bool direct = try_direct && ::fcntl(fd, F_SETFL, O_DIRECT) == 0;
  if (!direct) (void)::fcntl(fd, F_SETFL, 0);
  return OpenFile{fd, static_cast<int64_t>(st.st_size), static_cast<uint64_t>(st.st_ino), direct};
}

Status PreadAll(int fd, int64_t offset, size_t n, char* out, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError(errno, "cannot read", path);
    if (r == 0) return Error(ErrorCode::kDataLoss, "short read of " + path);
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace internal

FileSystem* FileSystem::Posix() {
  static PosixFileSystem* posix = new PosixFileSystem();  // never destroyed: used by detached tools
  return posix;
}

bool IsTemporaryName(std::string_view name) { return name.find(kTempMarker) != std::string_view::npos; }

bool IsStaleTemporary(FileSystem& fs, const std::string& path, int64_t now_unix) {
  auto mtime = fs.ModifiedTime(path);
  if (!mtime.ok()) return false;
  int64_t touched = *mtime;
  const std::string_view name = std::string_view(path).substr(path.rfind('/') + 1);  // npos + 1 = 0
  const size_t marker = name.find(kTempMarker);
  std::string_view rest = marker == std::string_view::npos ? "" : name.substr(marker + kTempMarker.size());
  if (rest.substr(0, kAsideTag.size()) == kAsideTag) {
    rest.remove_prefix(kAsideTag.size());
    int64_t moved = 0;
    const auto parsed = std::from_chars(rest.data(), rest.data() + rest.size(), moved);
    if (parsed.ec == std::errc() && moved <= now_unix + kStaleTempSeconds) touched = std::max(touched, moved);
  }
  return now_unix - touched > kStaleTempSeconds;
}

}  // namespace flashserve::kvstore
