// ReadBufferPool (kvstore/buffer_pool.h): slabs, best-fit warm then cold runs, coalescing frees.
#include "kvstore/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace flashserve::kvstore {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Slab {
  char* end = nullptr;
  void* raw = nullptr;  // the mapping (one huge page larger, for the alignment)
  size_t raw_bytes = 0;
};

struct Run {
  size_t bytes = 0;
  bool warm = true;  // resident (not returned to the kernel since it was last used)
};

}  // namespace

struct ReadBufferPool::State {
  State(size_t capacity, size_t slab, size_t retain) : capacity(capacity), slab_bytes(slab), retain(retain) {}
  ~State() {
    for (auto& [start, slab] : slabs) ::munmap(slab.raw, slab.raw_bytes);
  }

  // A free run of at least n bytes (best fit among warm runs, then cold ones), split; null when
  // none. mu held.
  char* Take(size_t n) {
    for (bool warm : {true, false}) {
      std::set<std::pair<size_t, char*>>& by_size = warm ? warm_by_size : cold_by_size;
      auto it = by_size.lower_bound({n, nullptr});
      if (it == by_size.end()) continue;
      char* p = it->second;
      const size_t len = it->first;
      RemoveFree(free_at.find(p));
      if (len > n) AddFree(p + n, Run{len - n, warm});
      used += n;
      return p;
    }
    return nullptr;
  }

  // Returns [p, p + n) and merges it with free warm neighbours of the same slab; beyond `retain`
  // warm bytes, the merged run goes back to the kernel and joins its cold neighbours. mu held.
  void Give(char* p, size_t n) {
    used -= n;
    const auto slab = std::prev(slabs.upper_bound(p));
    Merge(slab, &p, &n, /*warm=*/true);
    if (warm_free + n <= retain) {
      AddFree(p, Run{n, true});
      return;
    }
    ::madvise(p, n, MADV_DONTNEED);
    Merge(slab, &p, &n, /*warm=*/false);
    AddFree(p, Run{n, false});
  }

  // Absorbs the free runs of the given warmth that touch [*p, *p + *n) inside the slab.
  void Merge(std::map<char*, Slab>::iterator slab, char** p, size_t* n, bool warm) {
    if (auto next = free_at.find(*p + *n); next != free_at.end() && next->second.warm == warm &&
                                           *p + *n < slab->second.end) {
      *n += next->second.bytes;
      RemoveFree(next);
    }
    if (auto after = free_at.lower_bound(*p); after != free_at.begin()) {
      const auto prev = std::prev(after);
      if (prev->second.warm == warm && prev->first >= slab->first && prev->first + prev->second.bytes == *p) {
        *p = prev->first;
        *n += prev->second.bytes;
        RemoveFree(prev);
      }
    }
  }

  // Maps one more slab (2 MiB-aligned, huge pages advised; smaller than slab_bytes where only
  // that much capacity is left) when it could hold n bytes. mu held.
  bool AddSlab(size_t n) {
    const size_t bytes = std::min(slab_bytes, (capacity - mapped) / kHugePage * kHugePage);
    if (bytes < n) return false;
    const size_t raw_bytes = bytes + kHugePage;
    void* raw = ::mmap(nullptr, raw_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return false;
    char* start = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(raw), kHugePage));
    ::madvise(start, bytes, MADV_HUGEPAGE);  // a hint: fine if refused
    slabs.emplace(start, Slab{start + bytes, raw, raw_bytes});
    mapped += bytes;
    AddFree(start, Run{bytes, false});  // never touched: nothing resident yet
    return true;
  }

  void AddFree(char* p, Run run) {
    free_at.emplace(p, run);
    (run.warm ? warm_by_size : cold_by_size).emplace(run.bytes, p);
    if (run.warm) warm_free += run.bytes;
  }
  void RemoveFree(std::map<char*, Run>::iterator it) {
    (it->second.warm ? warm_by_size : cold_by_size).erase({it->second.bytes, it->first});
    if (it->second.warm) warm_free -= it->second.bytes;
    free_at.erase(it);
  }

  const size_t capacity;    // bytes of slabs at most
  const size_t slab_bytes;  // 0: no slabs
  const size_t retain;      // warm free bytes at most
  std::mutex mu;
  std::map<char*, Slab> slabs;  // by start address
  std::map<char*, Run> free_at;
  std::set<std::pair<size_t, char*>> warm_by_size, cold_by_size;
  size_t mapped = 0, used = 0, warm_free = 0;
  int64_t heap_allocations = 0;
};

ReadBufferPool::ReadBufferPool(size_t capacity, size_t slab_bytes, size_t retain) {
  const size_t cap = RoundUp(capacity, kHugePage);
  const size_t slab = std::min(RoundUp(std::max(slab_bytes, kHugePage), kHugePage), cap);
  state_ = std::make_shared<State>(cap, slab, retain != SIZE_MAX ? retain : std::max(cap / 8, slab));
}

ReadBufferPool::~ReadBufferPool() = default;

std::shared_ptr<char> ReadBufferPool::Allocate(size_t bytes) {
  const size_t n = RoundUp(std::max<size_t>(bytes, 1), kPageBytes);
  State& s = *state_;
  char* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (n <= s.slab_bytes) {
      p = s.Take(n);
      if (p == nullptr && s.AddSlab(n)) p = s.Take(n);
    }
    if (p == nullptr) ++s.heap_allocations;
  }
  // Built without the lock: if the control block cannot be allocated, the deleter runs here.
  if (p != nullptr) {
    return std::shared_ptr<char>(p, [state = state_, n](char* q) {
      std::lock_guard<std::mutex> l(state->mu);
      state->Give(q, n);
    });
  }
  p = static_cast<char*>(std::aligned_alloc(kPageBytes, n));
  if (p == nullptr) return nullptr;
  return std::shared_ptr<char>(p, [](char* q) { std::free(q); });
}

ReadBufferPool::Stats ReadBufferPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  const State& s = *state_;
  return Stats{static_cast<int64_t>(s.slabs.size()), static_cast<int64_t>(s.mapped), static_cast<int64_t>(s.used),
               static_cast<int64_t>(s.warm_free), s.heap_allocations};
}

}  // namespace flashserve::kvstore
