// Batched whole-file reads for FileSystem::Posix (kvstore/posix_io.h): one io_uring per thread;
// files opened a few dozen at a time and sorted by where their data lies on the device, then
// read in groups of up to 4 MiB, each file straight into its own buffer from the caller's
// ReadBufferPool (2 MiB huge-page slabs), which the consumer keeps (no copy). Files are opened
// with O_DIRECT where the file system allows it; a group's reads are submitted together, so
// reads of files that lie next to each other on disk (the objects of one prefix, written one
// after another) merge into large device requests (huge pages keep a request's memory in few
// segments). Completed reads free their group for the next files before they are handed to the
// consumer, so the device keeps working while they are checked. A failed submission turns the
// ring off for its thread (logged; later batches return false and the store reads buffered).
// Called by FileSystem::Posix()'s ReadWholeFilesDirect from any thread; each thread has its own
// ring (thread_local), so calls never share state; a consumer must not start another batch on
// the same thread.
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <liburing.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/log.h"
#include "kvstore/posix_io.h"

namespace flashserve::kvstore::internal {
namespace {

using base::Result;

constexpr size_t kAlign = 4096;                  // direct I/O: offsets, lengths and buffers
constexpr size_t kGroupBytes = size_t{4} << 20;  // about one large device request
constexpr size_t kGroups = 3;                    // in flight per thread
constexpr size_t kMaxFilesPerGroup = 32;
constexpr size_t kOpenAhead = 32;                // files opened and sorted at a time, per thread
constexpr unsigned kRingEntries = kGroups * kMaxFilesPerGroup;
constexpr int kNotSubmitted = INT32_MIN;
constexpr int kInFlight = INT32_MIN + 1;

size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Where the file's first byte lies on its device (FIEMAP), or UINT64_MAX where the file system
// does not say or has not placed it yet (delayed allocation): such files keep inode order. Reads
// submitted in this order merge into large requests wherever the files lie back to back, in
// whatever order they were written (by inode order, a 16-object prefix read as 9 separate runs
// where device order found 3).
uint64_t DeviceOffset(int fd) {
  alignas(struct fiemap) char buf[sizeof(struct fiemap) + sizeof(struct fiemap_extent)] = {};
  auto* map = reinterpret_cast<struct fiemap*>(buf);
  map->fm_length = FIEMAP_MAX_OFFSET;
  map->fm_extent_count = 1;
  if (::ioctl(fd, FS_IOC_FIEMAP, map) != 0 || map->fm_mapped_extents == 0) return UINT64_MAX;
  const struct fiemap_extent& e = map->fm_extents[0];
  if ((e.fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC)) != 0) return UINT64_MAX;
  return e.fe_physical;
}

// One thread's ring, set up on the thread's first batch and released when it ends.
class ThreadReader {
 public:
  ThreadReader() {
    const int r = io_uring_queue_init(kRingEntries, &ring_, 0);
    if (r < 0) {
      error_ = std::string("io_uring_queue_init: ") + std::strerror(-r);
      return;
    }
    ring_ok_ = true;
  }
  ~ThreadReader() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
  }
  ThreadReader(const ThreadReader&) = delete;
  ThreadReader& operator=(const ThreadReader&) = delete;

  bool usable() const { return ring_ok_ && !broken_; }
  const std::string& error() const { return error_; }
  // After a failed submission or wait the ring may hold reads into buffers: this thread never
  // enters it again (later batches use buffered reads), and those buffers are never freed.
  void Break(std::string why) {
    broken_ = true;
    error_ = std::move(why);
    FS_LOG(kWarning, "kvstore: {}; this I/O thread reads objects with buffered reads from now on", error_);
  }
  // Leaked on purpose: the kernel may write an abandoned read's buffer at any time, even after
  // this thread and its ring are gone.
  static void KeepForever(std::shared_ptr<char> buffer) { new std::shared_ptr<char>(std::move(buffer)); }
  io_uring* ring() { return &ring_; }

 private:
  io_uring ring_{};
  bool ring_ok_ = false;
  bool broken_ = false;
  std::string error_;
};

struct Slot {
  size_t index = 0;  // into the batch's paths
  OpenFile file;
  uint64_t device_offset = UINT64_MAX;  // of the file's first byte (DeviceOffset)
  std::shared_ptr<char> buffer;         // from the pool, RoundUp(file.size, kAlign) bytes
  int result = kNotSubmitted;
};

// One ReadWholeFilesDirect call: fills free groups with opened files (in device order) and
// submits each group's reads at once; a group is refilled as soon as all its reads are back,
// and its files are handed to the consumer after that, so up to kGroups groups keep the device
// busy while files are checked.
class Batch {
 public:
  Batch(ThreadReader& reader, std::span<const std::string> paths, ReadBufferPool& buffers,
        const WholeFileConsumer& consume)
      : reader_(reader), paths_(paths), buffers_(buffers), consume_(consume) {}

  // Each turn: submit every free group, wait for completions, submit the groups they freed,
  // and only then check the files that came back, so the device has its next reads while the
  // consumer works (a virtual disk may complete everything in flight at once).
  void Run() {
    for (size_t g = kGroups; g-- > 0;) free_groups_.push_back(g);
    for (;;) {
      SubmitFreeGroups();
      ReleaseFinishedGroups();  // groups none of whose reads the kernel took
      if (busy_ == 0) {
        const bool more = !queue_.empty() || next_ < paths_.size();
        if (more && reader_.usable()) continue;
        while (!queue_.empty() || next_ < paths_.size()) {  // the ring failed: the rest without it
          if (queue_.empty()) {
            OpenMore();
            continue;
          }
          Slot s = std::move(queue_.front());
          queue_.pop_front();
          ReadAlone(s);
        }
        break;
      }
      Reap();
      ReleaseFinishedGroups();
      SubmitFreeGroups();
      for (Slot& s : done_) Finish(s);
      done_.clear();
    }
  }

 private:
  // Opens the batch's next files and queues them in the order of their data on the device.
  // A thread holds at most kOpenAhead files waiting plus kGroups * kMaxFilesPerGroup in flight
  // (a file read in full is closed before it is checked).
  void OpenMore() {
    std::vector<Slot> opened;
    while (next_ < paths_.size() && opened.size() < kOpenAhead) {
      Slot s;
      s.index = next_++;
      // Where the file system refuses O_DIRECT the file stays buffered; the ring reads it too.
      Result<OpenFile> f = OpenRegularFile(paths_[s.index], /*try_direct=*/true);
      if (!f.ok()) {
        consume_(s.index, f.error());
        continue;
      }
      s.file = *f;
      s.device_offset = DeviceOffset(s.file.fd);
      opened.push_back(std::move(s));
    }
    std::stable_sort(opened.begin(), opened.end(), [](const Slot& a, const Slot& b) {
      return std::tie(a.device_offset, a.file.inode) < std::tie(b.device_offset, b.file.inode);
    });
    for (Slot& s : opened) queue_.push_back(std::move(s));
  }

  // Takes opened files into group g, each with a buffer, until the group is full; an empty or
  // oversized file is read on its own.
  void Fill(size_t g) {
    std::vector<Slot>& slots = slots_[g];
    size_t used = 0;
    while (slots.size() < kMaxFilesPerGroup) {
      if (queue_.empty()) {
        if (next_ >= paths_.size()) break;
        OpenMore();
        continue;
      }
      const size_t need = RoundUp(static_cast<size_t>(queue_.front().file.size), kAlign);
      if (used + need > kGroupBytes && need > 0 && need <= kGroupBytes) break;  // the next group's
      Slot s = std::move(queue_.front());
      queue_.pop_front();
      if (need == 0 || need > kGroupBytes) {
        need == 0 ? ReadAlone(s) : ReadLarge(s);
        continue;
      }
      s.buffer = buffers_.Allocate(need);
      if (s.buffer == nullptr) {
        Deliver(s, OutOfMemory(s));
        continue;
      }
      used += need;
      slots.push_back(std::move(s));
    }
  }

  // Submits group g's reads in one call, in device order: the block layer merges neighbours.
  // Reads the kernel did not take are read alone at once.
  void Submit(size_t g) {
    std::vector<Slot>& slots = slots_[g];
    io_uring* ring = reader_.ring();
    for (size_t k = 0; k < slots.size(); ++k) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);  // never null: kRingEntries covers every group
      io_uring_prep_read(sqe, slots[k].file.fd, slots[k].buffer.get(),
                         static_cast<unsigned>(RoundUp(static_cast<size_t>(slots[k].file.size), kAlign)), 0);
      io_uring_sqe_set_data64(sqe, (static_cast<uint64_t>(g) << 32) | k);
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
    pending_[g] = submitted;
    for (size_t k = 0; k < slots.size(); ++k) {
      if (k < submitted) {
        slots[k].result = kInFlight;
      } else {
        Finish(slots[k]);
      }
    }
  }

  void SubmitFreeGroups() {
    while (!free_groups_.empty() && reader_.usable()) {
      const size_t g = free_groups_.back();
      Fill(g);
      if (slots_[g].empty()) break;
      free_groups_.pop_back();
      ++busy_;
      Submit(g);
    }
  }

  // Groups whose reads are all back (their files moved to done_ or already handed over) take
  // files again.
  void ReleaseFinishedGroups() {
    for (size_t g = 0; g < kGroups; ++g) {
      if (slots_[g].empty() || pending_[g] > 0) continue;
      slots_[g].clear();
      free_groups_.push_back(g);
      --busy_;
    }
  }

  // Waits for a read, then takes every completion that is ready, into done_. If the wait fails,
  // every read still in flight is abandoned (its buffer kept forever; its file read alone).
  void Reap() {
    io_uring_cqe* cqe = nullptr;
    int r = io_uring_wait_cqe(reader_.ring(), &cqe);
    if (r == -EINTR) return;
    if (r < 0) {  // not expected with reads in flight
      reader_.Break(std::string("io_uring_wait_cqe: ") + std::strerror(-r));
      for (size_t g = 0; g < kGroups; ++g) {
        for (Slot& s : slots_[g]) {
          if (s.result != kInFlight) continue;
          reader_.KeepForever(s.buffer);
          done_.push_back(std::move(s));
        }
        pending_[g] = 0;
      }
      return;
    }
    for (; r == 0; r = io_uring_peek_cqe(reader_.ring(), &cqe)) {
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      Slot& s = slots_[tag >> 32][tag & 0xffffffffu];
      s.result = cqe->res;
      if (s.result >= 0 && static_cast<size_t>(s.result) >= static_cast<size_t>(s.file.size)) {
        ::close(s.file.fd);  // read in full: only a retry would need it
        s.file.fd = -1;
      }
      --pending_[tag >> 32];
      io_uring_cqe_seen(reader_.ring(), cqe);
      done_.push_back(std::move(s));
    }
  }

  void Finish(Slot& s) {
    const size_t size = static_cast<size_t>(s.file.size);
    if (s.result >= 0 && static_cast<size_t>(s.result) >= size) {  // abandoned reads stay kInFlight
      const std::string_view bytes(s.buffer.get(), size);
      Deliver(s, base::ShareBytes(s.buffer, bytes));
      return;
    }
    // Short (the file shrank?), refused by direct I/O, never submitted, abandoned: read it alone.
    const bool retry = s.result >= 0 || s.result == kNotSubmitted || s.result == kInFlight || s.result == -EINVAL ||
                       s.result == -EAGAIN;
    if (retry) {
      ReadAlone(s);
      return;
    }
    Deliver(s, ErrnoError(-s.result, "cannot read", paths_[s.index]));
  }

  // Closes the slot's file and hands its bytes or error to the consumer.
  void Deliver(Slot& s, base::Result<base::SharedBytes> bytes) {
    if (s.file.fd >= 0) ::close(s.file.fd);
    s.buffer.reset();
    consume_(s.index, std::move(bytes));
  }

  base::Error OutOfMemory(const Slot& s) const {
    return base::Error(base::ErrorCode::kResourceExhausted,
                       "no memory to read " + paths_[s.index] + " (" + std::to_string(s.file.size) + " bytes)");
  }

  // A file larger than a group: direct preads into a buffer of its own (one large request per
  // call), buffered where direct I/O is refused or the file came up short.
  void ReadLarge(Slot& s) {
    const size_t size = static_cast<size_t>(s.file.size);
    if (s.file.direct) s.buffer = buffers_.Allocate(RoundUp(size, kAlign));
    if (s.buffer == nullptr) {
      ReadAlone(s);
      return;
    }
    char* buf = s.buffer.get();
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
      Deliver(s, base::ShareBytes(s.buffer, std::string_view(buf, size)));
    } else if (err != 0 && err != EINVAL) {
      Deliver(s, ErrnoError(err, "cannot read", paths_[s.index]));
    } else {
      ReadAlone(s);  // short (the file shrank?) or refused: the buffered read says which
    }
  }

  // Buffered pread of the whole file into memory of its own.
  void ReadAlone(Slot& s) {
    (void)::fcntl(s.file.fd, F_SETFL, 0);
    std::string bytes(static_cast<size_t>(s.file.size), '\0');
    const base::Status st = PreadAll(s.file.fd, 0, bytes.size(), bytes.data(), paths_[s.index]);
    Deliver(s, st.ok() ? base::Result<base::SharedBytes>(base::MakeSharedBytes(std::move(bytes))) : st.error());
  }

  ThreadReader& reader_;
  std::span<const std::string> paths_;
  ReadBufferPool& buffers_;
  const WholeFileConsumer& consume_;
  std::vector<Slot> slots_[kGroups];
  size_t pending_[kGroups] = {};
  std::vector<size_t> free_groups_;
  size_t busy_ = 0;           // groups submitted and not yet released
  std::vector<Slot> done_;    // reads back, not yet handed over
  size_t next_ = 0;          // the next path to open
  std::deque<Slot> queue_;   // opened, in device order, not yet in a group
};

}  // namespace

bool ReadWholeFilesWithRing(std::span<const std::string> paths, ReadBufferPool& buffers,
                            const WholeFileConsumer& consume) {
  thread_local ThreadReader reader;
  if (!reader.usable()) {
    static std::once_flag logged;
    std::call_once(logged, [&] {
      FS_LOG(kWarning, "kvstore: direct batched reads unavailable ({}); reading objects with buffered reads",
             reader.error());
    });
    return false;
  }
  Batch(reader, paths, buffers, consume).Run();
  return true;
}

}  // namespace flashserve::kvstore::internal
