// Test-only helpers for the kvstore tests: a settable clock, a temporary directory under /tmp,
// a fault-injecting FileSystem (byte quota that fails writes like a full disk, failing or paused
// reads and opens, failing listings), and key / payload makers. Thread-safe where the tests
// share them across threads.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "base/clock.h"
#include "kvstore/file_system.h"
#include "kvstore/kv_store.h"

namespace flashserve::kvstore::testing {

// Unix time is set by the test; durations come from the real monotonic clock.
class FakeClock final : public base::Clock {
 public:
  // Starts at the real time, so file modification times written by the tests are comparable.
  FakeClock() : now_(base::SystemClock().NowUnixSeconds()) {}
  explicit FakeClock(int64_t unix_seconds) : now_(unix_seconds) {}
  int64_t NowUnixSeconds() const override { return now_.load(); }
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void Set(int64_t unix_seconds) { now_.store(unix_seconds); }
  void Advance(int64_t seconds) { now_.fetch_add(seconds); }

 private:
  std::atomic<int64_t> now_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/fs_kvstore_test_XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Wraps the POSIX file system. Writes beyond the byte quota fail the way a full disk does
// (kResourceExhausted, nothing left behind); reads fail with kIoError while fail_reads is set;
// while pause_payload_reads is set, a read past a file's first bytes (a payload) finishes, then
// waits (counted in paused_reads) until the flag is cleared.
class FaultFileSystem final : public FileSystem {
 public:
  std::atomic<int64_t> quota_bytes{INT64_MAX};
  std::atomic<bool> fail_reads{false};
  std::atomic<int64_t> writes{0};
  std::atomic<bool> block_writes{false};  // writers wait while set
  std::atomic<bool> pause_payload_reads{false};
  std::atomic<int> paused_reads{0};
  std::atomic<bool> fail_lists{false};  // List fails (kIoError) while set
  std::atomic<int64_t> lists{0};        // List calls, failed ones included
  // While pause_opens (pause_removes) is set, opening (removing) a file whose path contains
  // pause_open_part (pause_remove_part; set first) waits until it is cleared, counted in
  // paused_opens (_removes).
  std::string pause_open_part, pause_remove_part;
  std::atomic<bool> pause_opens{false}, pause_removes{false};
  std::atomic<int> paused_opens{0}, paused_removes{0};

  base::Status WriteAtomic(const std::string& path, std::string_view header, std::string_view payload) override {
    const int64_t size = static_cast<int64_t>(header.size() + payload.size());
    if (quota_bytes.fetch_sub(size) < size) {
      quota_bytes.fetch_add(size);
      return base::Error(base::ErrorCode::kResourceExhausted, "cannot write " + path + ": No space left on device");
    }
    while (block_writes.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++writes;
    return posix_->WriteAtomic(path, header, payload);
  }
  base::Result<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    if (fail_reads.load()) {
      return base::Error(base::ErrorCode::kIoError, "cannot open " + path + ": Input/output error");
    }
    MaybePause(path, pause_open_part, pause_opens, paused_opens);
    auto file = posix_->OpenForRead(path);
    if (!file.ok()) return file;
    return std::unique_ptr<ReadableFile>(new PausingFile(std::move(file).value(), this));
  }
  bool ReadWholeFilesDirect(std::span<const std::string> paths, ReadBufferPool& buffers,
                            const WholeFileConsumer& consume) override {
    if (fail_reads.load() || pause_payload_reads.load()) return false;  // read through OpenForRead
    return posix_->ReadWholeFilesDirect(paths, buffers, consume);
  }
  base::Status Remove(const std::string& path) override {
    MaybePause(path, pause_remove_part, pause_removes, paused_removes);
    return posix_->Remove(path);
  }
  base::Result<std::string> MoveAside(const std::string& path, int64_t now_unix) override {
    return posix_->MoveAside(path, now_unix);
  }
  base::Status PutBack(const std::string& aside, const std::string& path) override {
    return posix_->PutBack(aside, path);
  }
  base::Status CreateDirs(const std::string& path) override { return posix_->CreateDirs(path); }
  // Sorted by name, so that scans visit objects in a known order.
  base::Result<std::vector<DirEntry>> List(const std::string& dir) override {
    ++lists;
    if (fail_lists.load()) return base::Error(base::ErrorCode::kIoError, "cannot list " + dir + ": Stale file handle");
    auto entries = posix_->List(dir);
    if (entries.ok()) {
      std::sort(entries->begin(), entries->end(), [](const DirEntry& x, const DirEntry& y) { return x.name < y.name; });
    }
    return entries;
  }
  base::Result<int64_t> ModifiedTime(const std::string& path) override { return posix_->ModifiedTime(path); }

 private:
  void MaybePause(const std::string& path, const std::string& part, const std::atomic<bool>& pause,
                  std::atomic<int>& paused) {
    if (!pause.load() || path.find(part) == std::string::npos) return;
    ++paused;
    while (pause.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  class PausingFile final : public ReadableFile {
   public:
    PausingFile(std::unique_ptr<ReadableFile> file, FaultFileSystem* owner) : file_(std::move(file)), owner_(owner) {}
    int64_t size() const override { return file_->size(); }
    base::Status ReadAt(int64_t offset, size_t n, char* out) override {
      base::Status s = file_->ReadAt(offset, n, out);
      if (offset > 0 && owner_->pause_payload_reads.load()) {
        ++owner_->paused_reads;
        while (owner_->pause_payload_reads.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return s;
    }
    void WillReadAll() override { file_->WillReadAll(); }
    void WillReadHeaderOnly() override { file_->WillReadHeaderOnly(); }
    void DropCached() override { file_->DropCached(); }

   private:
    std::unique_ptr<ReadableFile> file_;
    FaultFileSystem* owner_;
  };

  FileSystem* posix_ = FileSystem::Posix();
};

// Waits up to `seconds` for done().
template <typename F>
bool WaitFor(F done, double seconds = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

inline ObjectKey Key(int i, ObjectKind kind = ObjectKind::kBlock) {
  ObjectKey key;
  key.kind = kind;
  key.hash = kv::Sha256("key-" + std::to_string(i));
  return key;
}

inline Payload MakePayload(int i, size_t bytes = 1000) {
  std::string s(bytes, '\0');
  for (size_t j = 0; j < bytes; ++j) s[j] = static_cast<char>((i * 131 + static_cast<int>(j) * 7) & 0xff);
  return base::MakeSharedBytes(std::move(s));
}

constexpr char kFingerprint[] = "00ff00ff";

inline StoreConfig BaseConfig(const TempDir& dir, bool with_disk = true) {
  StoreConfig c;
  c.fingerprint = kFingerprint;
  c.memory_bytes = 1 << 20;
  if (with_disk) {
    c.disk_dir = dir.Sub("l2");
    c.disk_bytes = 1 << 24;
  }
  c.background_gc = false;
  // CTest runs the store's tests a second time with direct-I/O batch reads.
  c.direct_io = std::getenv("FS_KVSTORE_TEST_DIRECT_IO") != nullptr;
  return c;
}

}  // namespace flashserve::kvstore::testing
