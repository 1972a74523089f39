// ReadBufferPool (kvstore/buffer_pool.h): slabs, best-fit runs, coalescing frees.
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

}  // namespace

struct ReadBufferPool::State {
  State(size_t capacity, size_t slab) : capacity(capacity), slab_bytes(slab) {}
  ~State() {
    for (auto& [start, slab] : slabs) ::munmap(slab.raw, slab.raw_bytes);
  }

  // A free run of at least n bytes (best fit), split; null when none. mu held.
  char* Take(size_t n) {
    auto it = free_by_size.lower_bound({n, nullptr});
    if (it == free_by_size.end()) return nullptr;
    const auto [len, p] = *it;
    free_by_size.erase(it);
    free_at.erase(p);
    if (len > n) AddFree(p + n, len - n);
    used += static_cast<int64_t>(n);
    return p;
  }

  // Returns [p, p + n) and merges it with free neighbours of the same slab; a slab left wholly
  // free is unmapped unless it is the last one. mu held.
  void Give(char* p, size_t n) {
    used -= static_cast<int64_t>(n);
    const auto slab = std::prev(slabs.upper_bound(p));
    if (auto next = free_at.find(p + n); next != free_at.end() && p + n < slab->second.end) {
      n += next->second;
      RemoveFree(next);
    }
    if (auto after = free_at.lower_bound(p); after != free_at.begin()) {
      const auto prev = std::prev(after);
      if (prev->first >= slab->first && prev->first + prev->second == p) {
        p = prev->first;
        n += prev->second;
        RemoveFree(prev);
      }
    }
    if (p == slab->first && p + n == slab->second.end && slabs.size() > 1) {
      ::munmap(slab->second.raw, slab->second.raw_bytes);
      mapped -= n;
      slabs.erase(slab);
      return;
    }
    AddFree(p, n);
  }

  // Maps one more slab (2 MiB-aligned, huge pages advised) when capacity allows. mu held.
  bool AddSlab() {
    if (slab_bytes == 0 || mapped + slab_bytes > capacity) return false;
    const size_t raw_bytes = slab_bytes + kHugePage;
    void* raw = ::mmap(nullptr, raw_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return false;
    char* start = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(raw), kHugePage));
    ::madvise(start, slab_bytes, MADV_HUGEPAGE);  // a hint: fine if refused
    slabs.emplace(start, Slab{start + slab_bytes, raw, raw_bytes});
    mapped += slab_bytes;
    AddFree(start, slab_bytes);
    return true;
  }

  void AddFree(char* p, size_t n) {
    free_at.emplace(p, n);
    free_by_size.emplace(n, p);
  }
  void RemoveFree(std::map<char*, size_t>::iterator it) {
    free_by_size.erase({it->second, it->first});
    free_at.erase(it);
  }

  const size_t capacity;    // bytes of slabs at most
  const size_t slab_bytes;  // 0: no slabs
  std::mutex mu;
  std::map<char*, Slab> slabs;  // by start address
  std::map<char*, size_t> free_at;
  std::set<std::pair<size_t, char*>> free_by_size;
  size_t mapped = 0;
  int64_t used = 0;
  int64_t heap_allocations = 0;
};

ReadBufferPool::ReadBufferPool(size_t capacity, size_t slab_bytes) {
  const size_t cap = RoundUp(capacity, kHugePage);
  state_ = std::make_shared<State>(cap, std::min(RoundUp(std::max(slab_bytes, kHugePage), kHugePage), cap));
}

ReadBufferPool::~ReadBufferPool() = default;

std::shared_ptr<char> ReadBufferPool::Allocate(size_t bytes) {
  const size_t n = RoundUp(std::max<size_t>(bytes, 1), kPageBytes);
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    char* p = n <= s.slab_bytes ? s.Take(n) : nullptr;
    if (p == nullptr && n <= s.slab_bytes && s.AddSlab()) p = s.Take(n);
    if (p != nullptr) {
      return std::shared_ptr<char>(p, [state = state_, n](char* q) {
        std::lock_guard<std::mutex> l(state->mu);
        state->Give(q, n);
      });
    }
    ++s.heap_allocations;
  }
  char* p = static_cast<char*>(std::aligned_alloc(kPageBytes, n));
  if (p == nullptr) return nullptr;
  return std::shared_ptr<char>(p, [](char* q) { std::free(q); });
}

ReadBufferPool::Stats ReadBufferPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return Stats{static_cast<int64_t>(state_->slabs.size()), static_cast<int64_t>(state_->mapped), state_->used,
               state_->heap_allocations};
}

}  // namespace flashserve::kvstore
