// Little-endian byte building and bounds-checked parsing for binary formats (state codec, KV
// store objects, transfer frames), plus the FNV-1a 64-bit checksum. Header-only; no shared
// state.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace flashserve::base {

inline uint64_t Fnv1a64(std::string_view data, uint64_t seed = 1469598103934665603ull) {
  uint64_t h = seed;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void PutBytes(const void* data, size_t n) { out_.append(static_cast<const char*>(data), n); }
  std::string& str() { return out_; }
  size_t size() const { return out_.size(); }

 private:
  std::string out_;
};

// Every read returns false (and stays failed) once the input is exhausted.
class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}
  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_trivially_copyable_v<T>);
    return GetBytes(v, sizeof *v);
  }
  bool GetBytes(void* out, size_t n) {
    if (failed_ || n > data_.size() - pos_) return Fail();
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // A view of the next n bytes, consumed.
  bool View(size_t n, std::string_view* out) {
    if (failed_ || n > data_.size() - pos_) return Fail();
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  size_t remaining() const { return data_.size() - pos_; }
  bool failed() const { return failed_; }

 private:
  bool Fail() {
    failed_ = true;
    return false;
  }
  std::string_view data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace flashserve::base
