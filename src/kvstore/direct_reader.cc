// Batched whole-file reads for FileSystem::Posix (kvstore/posix_io.h): one io_uring per thread and
// three windows of huge-page memory. Files are opened with O_DIRECT where the file system allows
// it; a window's reads are submitted together, so reads of files that lie next to each other on
// disk (the objects of one prefix, written one after another) merge into large device requests
// (huge pages keep a request's memory in few segments). While a finished window is handed to
// the consumer, the others stay in flight. A file larger than a window is read on its own with
// direct I/O into memory of its own. A failed submission turns the ring off for its thread
// (logged; later batches return false and the store reads buffered). Called by
// FileSystem::Posix()'s ReadWholeFilesDirect from any thread; each thread has its own ring and
// windows (thread_local), so calls never share state.
#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "kvstore/posix_io.h"

namespace flashserve::kvstore::internal {
namespace {

using base::Result;

constexpr size_t kAlign = 4096;                    // direct I/O: offsets, lengths and buffers
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kWindowBytes = size_t{4} << 20;   // about one large device request
constexpr size_t kWindows = 3;                     // per thread: two in flight while one is consumed
constexpr size_t kMaxFilesPerWindow = 32;
constexpr unsigned kRingEntries = kWindows * kMaxFilesPerWindow;
constexpr int kNotSubmitted = INT32_MIN;

size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The first 2 MiB boundary in a mapping made kHugePage bytes larger than needed.
char* HugePageStart(void* raw) {
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1));
}

// One thread's ring and windows, set up on the thread's first batch and released when it ends.
class ThreadReader {
 public:
  ThreadReader() {
    const int r = io_uring_queue_init(kRingEntries, &ring_, 0);
    if (r < 0) {
      error_ = std::string("io_uring_queue_init: ") + std::strerror(-r);
      return;
    }
    ring_ok_ = true;
    void* raw = ::mmap(nullptr, kMappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      error_ = std::string("mapping the read windows: ") + std::strerror(errno);
      return;
    }
    mapping_ = raw;
    windows_ = HugePageStart(raw);
    ::madvise(windows_, kWindows * kWindowBytes, MADV_HUGEPAGE);  // a hint: fine if refused
  }
  ~ThreadReader() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (mapping_ != nullptr) ::munmap(mapping_, kMappedBytes);
  }
  ThreadReader(const ThreadReader&) = delete;
  ThreadReader& operator=(const ThreadReader&) = delete;

  bool usable() const { return ring_ok_ && mapping_ != nullptr && !broken_; }
  const std::string& error() const { return error_; }
  // After a failed submission or wait the ring may hold reads into the windows: this thread
  // never enters it again (later batches use buffered reads).
  void Break(std::string why) {
    broken_ = true;
    error_ = std::move(why);
    FS_LOG(kWarning, "kvstore: {}; this I/O thread reads objects with buffered reads from now on", error_);
  }
  io_uring* ring() { return &ring_; }
  char* window(size_t w) { return windows_ + w * kWindowBytes; }

 private:
  static constexpr size_t kMappedBytes = kWindows * kWindowBytes + kHugePage;
  io_uring ring_{};
  bool ring_ok_ = false;
  bool broken_ = false;
  void* mapping_ = nullptr;
  char* windows_ = nullptr;
  std::string error_;
};

struct Slot {
  size_t index = 0;  // into the batch's paths
  OpenFile file;
  size_t offset = 0;  // in the window
  int result = kNotSubmitted;
};

// One ReadWholeFilesDirect call: fills free windows with opened files and submits each window's
// reads at once, hands a window's files to the consumer as soon as all of them are read, and
// refills it, so the other windows keep the device busy meanwhile.
class Batch {
 public:
  Batch(ThreadReader& reader, std::span<const std::string> paths, const WholeFileConsumer& consume)
      : reader_(reader), paths_(paths), consume_(consume) {}

  void Run() {
    std::vector<size_t> free_windows;
    for (size_t w = kWindows; w-- > 0;) free_windows.push_back(w);
    size_t busy = 0;
    for (;;) {
      while (!free_windows.empty() && reader_.usable()) {
        const size_t w = free_windows.back();
        Fill(w);
        if (slots_[w].empty()) break;
        free_windows.pop_back();
        ++busy;
        Submit(w);
      }
      if (busy == 0 && !reader_.usable()) {  // the ring failed: finish the rest without it
        while (carry_ || next_ < paths_.size()) {
          Fill(0);
          for (Slot& s : slots_[0]) ReadAlone(s);
          slots_[0].clear();
        }
      }
      if (busy == 0) break;
      const size_t w = WaitForWindow();
      for (Slot& s : slots_[w]) Finish(s, reader_.window(w) + s.offset);
      slots_[w].clear();
      free_windows.push_back(w);
      --busy;
    }
  }

 private:
  // Opens files into window w until it is full; an empty or oversized file is read on its own.
  void Fill(size_t w) {
    std::vector<Slot>& slots = slots_[w];
    size_t used = 0;
    while (slots.size() < kMaxFilesPerWindow) {
      Slot s;
      if (carry_) {
        s = *std::exchange(carry_, std::nullopt);
      } else if (next_ < paths_.size()) {
        s.index = next_++;
        // Where the file system refuses O_DIRECT the file stays buffered; the ring reads it too.
        Result<OpenFile> f = OpenRegularFile(paths_[s.index], /*try_direct=*/true);
        if (!f.ok()) {
          consume_(s.index, f.error());
          continue;
        }
        s.file = *f;
      } else {
        break;
      }
      const size_t need = RoundUp(static_cast<size_t>(s.file.size), kAlign);
      if (need == 0 || need > kWindowBytes) {
        need == 0 ? ReadAlone(s) : ReadLarge(s);
        continue;
      }
      if (used + need > kWindowBytes) {
        carry_ = s;
        break;
      }
      s.offset = used;
      used += need;
      slots.push_back(s);
    }
  }

  // Submits window w's reads in one call, in inode order (on ext4 and XFS close to the order
  // on disk for files written one after another): the block layer merges neighbours. Reads the
  // kernel did not take stay kNotSubmitted and are read alone.
  void Submit(size_t w) {
    std::vector<Slot>& slots = slots_[w];
    std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.file.inode < b.file.inode; });
    io_uring* ring = reader_.ring();
    for (size_t k = 0; k < slots.size(); ++k) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: kRingEntries covers every window
      io_uring_prep_read(sqe, slots[k].file.fd, reader_.window(w) + slots[k].offset,
                         static_cast<unsigned>(RoundUp(static_cast<size_t>(slots[k].file.size), kAlign)), 0);
      io_uring_sqe_set_data64(sqe, (static_cast<uint64_t>(w) << 32) | k);
    }
    size_t submitted = 0;
    for (int idle = 0; submitted < slots.size();) {
      const int r = io_uring_submit(ring);
      if (r > 0) {
        submitted += static_cast<size_t>(r);
        continue;
      }
      if ((r == -EINTR || r == -EAGAIN || r == 0) && ++idle < 1000) {
        std::this_thread::yield();
        continue;
      }
      reader_.Break(std::string("io_uring_submit: ") + (r < 0 ? std::strerror(-r) : "no progress"));
      break;
    }
    for (size_t k = 0; k < submitted; ++k) slots[k].result = 0;
    pending_[w] = submitted;
  }

  // Waits until some busy window has all its reads back; returns it.
  size_t WaitForWindow() {
    for (;;) {
      for (size_t w = 0; w < kWindows; ++w) {
        if (!slots_[w].empty() && pending_[w] == 0) return w;
      }
      io_uring_cqe* cqe = nullptr;
      const int r = io_uring_wait_cqe(reader_.ring(), &cqe);
      if (r == -EINTR) continue;
      if (r < 0) {  // not expected with reads in flight; their windows are never read
        reader_.Break(std::string("io_uring_wait_cqe: ") + std::strerror(-r));
        abandoned_ = true;
        for (size_t& p : pending_) p = 0;
        continue;
      }
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      const size_t w = tag >> 32;
      slots_[w][tag & 0xffffffffu].result = cqe->res;
      --pending_[w];
      io_uring_cqe_seen(reader_.ring(), cqe);
    }
  }

  void Finish(Slot& s, const char* data) {
    const size_t size = static_cast<size_t>(s.file.size);
    if (!abandoned_ && s.result >= 0 && static_cast<size_t>(s.result) >= size) {
      Deliver(s, std::string_view(data, size));
      return;
    }
    // Short (the file shrank?), refused by direct I/O, never submitted: read it alone.
    const bool retry = abandoned_ || s.result >= 0 || s.result == kNotSubmitted || s.result == -EINVAL ||
                       s.result == -EAGAIN;
    if (retry) {
      ReadAlone(s);
      return;
    }
    Deliver(s, ErrnoError(-s.result, "cannot read", paths_[s.index]));
  }

  // Closes the slot's file and hands its bytes (still valid: they live in our memory) or error
  // to the consumer.
  void Deliver(Slot& s, base::Result<std::string_view> bytes) {
    ::close(s.file.fd);
    consume_(s.index, bytes);
  }

  // A file larger than a window: direct preads into 2 MiB-aligned memory of its own (one large
  // request per call), buffered where direct I/O is refused or the file came up short.
  void ReadLarge(Slot& s) {
    const size_t size = static_cast<size_t>(s.file.size);
    const size_t mapped = RoundUp(size, kHugePage);
    void* raw = s.file.direct ? ::mmap(nullptr, mapped + kHugePage, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                              : MAP_FAILED;
    if (raw == MAP_FAILED) {
      ReadAlone(s);
      return;
    }
    char* buf = HugePageStart(raw);
    ::madvise(buf, mapped, MADV_HUGEPAGE);
    size_t done = 0;
    int err = 0;
    while (done < size) {
      const ssize_t r = ::pread(s.file.fd, buf + done, RoundUp(size - done, kAlign), static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        err = r < 0 ? errno : 0;
        break;
      }
      done += static_cast<size_t>(r);
      if (done % kAlign != 0) break;  // end of file
    }
    if (done >= size) {
      Deliver(s, std::string_view(buf, size));
    } else if (err != 0 && err != EINVAL) {
      Deliver(s, ErrnoError(err, "cannot read", paths_[s.index]));
    } else {
      ReadAlone(s);  // short (the file shrank?) or refused: the buffered read says which
    }
    ::munmap(raw, mapped + kHugePage);
  }

  // Buffered pread of the whole file into memory of its own.
  void ReadAlone(Slot& s) {
    (void)::fcntl(s.file.fd, F_SETFL, 0);
    alone_.resize(static_cast<size_t>(s.file.size));
    const base::Status st = PreadAll(s.file.fd, 0, alone_.size(), alone_.data(), paths_[s.index]);
    Deliver(s, st.ok() ? base::Result<std::string_view>(std::string_view(alone_)) : st.error());
  }

  ThreadReader& reader_;
  std::span<const std::string> paths_;
  const WholeFileConsumer& consume_;
  std::vector<Slot> slots_[kWindows];
  size_t pending_[kWindows] = {};
  size_t next_ = 0;
  std::optional<Slot> carry_;  // opened, but did not fit the window being filled
  bool abandoned_ = false;     // the ring failed with reads in flight: their windows are not read
  std::string alone_;
};

}  // namespace

bool ReadWholeFilesWithRing(std::span<const std::string> paths, const WholeFileConsumer& consume) {
  thread_local ThreadReader reader;
  if (!reader.usable()) {
    static std::once_flag logged;
    std::call_once(logged, [&] {
      FS_LOG(kWarning, "kvstore: direct batched reads unavailable ({}); reading objects with buffered reads",
             reader.error());
    });
    return false;
  }
  Batch(reader, paths, consume).Run();
  return true;
}

}  // namespace flashserve::kvstore::internal
