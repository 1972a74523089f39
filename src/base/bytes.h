// Little-endian byte building and bounds-checked parsing for binary formats (state codec, KV
// store objects, transfer frames), plus the FNV-1a 64-bit and Checksum64 object checksums
// (one-shot and streaming), and hex text of byte strings. Pure functions and value types; no
// shared state.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace flashserve::base {

// Lower-case hex of `bytes` (two digits per byte).
std::string HexEncode(std::span<const uint8_t> bytes);
// Exactly 2 x out.size() hex digits (either case) -> out; false (out unspecified) otherwise.
bool HexDecode(std::string_view hex, std::span<uint8_t> out);

inline uint64_t Fnv1a64(std::string_view data, uint64_t seed = 1469598103934665603ull) {
  uint64_t h = seed;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The object checksum of KV store files and transfer frames: four interleaved multiply-rotate
// lanes over 32-byte stripes, several GB/s per core. Not cryptographic.
uint64_t Checksum64(std::string_view data);

// Checksum64 over data that arrives in pieces: Update(a); Update(b); Finish() equals
// Checksum64(a + b) for any split. Finish() does not change the state.
class Checksum64Stream {
 public:
  Checksum64Stream();
  void Update(std::string_view data);
  uint64_t Finish() const;

 private:
  uint64_t lanes_[4];
  uint64_t total_bytes_ = 0;
  char pending_[32];  // the incomplete stripe
  size_t num_pending_ = 0;
};

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
    if (n == 0) return true;  // out may be an empty vector's null data()
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
