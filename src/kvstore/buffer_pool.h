// ReadBufferPool: the memory direct reads land in, and stay in as L1 payloads (no copy out of a
// read buffer). Buffers are page-aligned runs of 4 KiB pages carved best-fit from slabs of
// 2 MiB-aligned memory in transparent huge pages where the kernel allows it, so a buffer is a
// few device segments and reads of neighbouring files still merge into large requests (a
// buffer of 4 KiB pages is a segment per page). A freed buffer is coalesced with its free
// neighbours and reused: objects restored in place of evicted ones take no page faults. Free
// memory stays resident ("warm") up to `retain` bytes; runs freed beyond that are returned to
// the kernel (MADV_DONTNEED, "cold"; reused after the warm ones, faulting in again), so resident
// memory stays within the bytes in use plus `retain`. Past `capacity` mapped bytes, buffers are
// plain page-aligned heap allocations (counted). KvStore owns one (direct_io only); the direct
// reader (direct_reader.cc) allocates from it on the I/O threads, and a buffer is freed on
// whichever thread drops its last reference. Thread-safe (one mutex); a buffer may outlive the
// pool (the pool's memory lives until its last buffer is freed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace flashserve::kvstore {

class ReadBufferPool {
 public:
  static constexpr size_t kPageBytes = 4096;
  static constexpr size_t kDefaultSlabBytes = size_t{32} << 20;

  // capacity: most bytes mapped as slabs (rounded up to 2 MiB); slab_bytes: rounded up to 2 MiB
  // (the last slab may be smaller, to fit the capacity); retain: free bytes kept resident
  // (default: an eighth of the capacity, at least one slab).
  explicit ReadBufferPool(size_t capacity, size_t slab_bytes = kDefaultSlabBytes, size_t retain = SIZE_MAX);
  ~ReadBufferPool();
  ReadBufferPool(const ReadBufferPool&) = delete;
  ReadBufferPool& operator=(const ReadBufferPool&) = delete;

  // At least `bytes` (rounded up to whole pages; 0 gives one page), page-aligned, writable;
  // returned to the pool when the last reference goes. Null only when memory is exhausted.
  std::shared_ptr<char> Allocate(size_t bytes);

  struct Stats {
    int64_t slabs = 0;
    int64_t mapped_bytes = 0;      // slabs
    int64_t used_bytes = 0;        // handed out from slabs, rounded to pages
    int64_t warm_free_bytes = 0;   // free and resident
    int64_t heap_allocations = 0;  // buffers that did not fit the slabs (total since start)
  };
  Stats stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace flashserve::kvstore
