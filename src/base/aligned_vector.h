// AlignedVector<T>: a std::vector whose storage starts on a 64-byte cache line, for the engine's
// activations, scratch and key rows and the kernels' own scratch. Vector loads of a row that
// straddles two lines cost two cache accesses; glibc's large blocks start 16 bytes past a page.
// Header-only; thread rules as std::vector's.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace flashserve::base {

inline constexpr std::size_t kCacheLineBytes = 64;

template <class T>
struct CacheLineAllocator {
  static_assert(alignof(T) <= kCacheLineBytes, "over-aligned element type");
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLineBytes}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace flashserve::base
