// Checksum64 and its streaming form (base/bytes.h).
#include "base/bytes.h"

#include <algorithm>

namespace flashserve::base {
namespace {

constexpr uint64_t kLaneMul = 0x9E3779B185EBCA87ull;
constexpr uint64_t kMixMul = 0xC2B2AE3D27D4EB4Full;
constexpr size_t kStripe = 32;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t Load64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t word) { return Rotl(acc + word * kMixMul, 31) * kLaneMul; }

inline uint64_t Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kMixMul;
  h ^= h >> 29;
  h *= kLaneMul;
  return h ^ (h >> 32);
}

// Folds every whole stripe of [p, p + n) into the lanes; returns the bytes consumed.
inline size_t ConsumeStripes(uint64_t lanes[4], const char* p, size_t n) {
  uint64_t l0 = lanes[0], l1 = lanes[1], l2 = lanes[2], l3 = lanes[3];
  size_t done = 0;
  for (; n - done >= kStripe; done += kStripe) {
    l0 = Round(l0, Load64(p + done));
    l1 = Round(l1, Load64(p + done + 8));
    l2 = Round(l2, Load64(p + done + 16));
    l3 = Round(l3, Load64(p + done + 24));
  }
  lanes[0] = l0, lanes[1] = l1, lanes[2] = l2, lanes[3] = l3;
  return done;
}

// The final mix: total length, the lanes, then the tail (< 32 bytes) word by word and byte by byte.
uint64_t Finalize(const uint64_t lanes[4], uint64_t total_bytes, const char* p, size_t n) {
  uint64_t h = total_bytes * kLaneMul;
  for (int i = 0; i < 4; ++i) h = Rotl(h ^ Round(0, lanes[i]), 27) * kLaneMul + kMixMul;
  for (; n >= 8; p += 8, n -= 8) h = Rotl(h ^ Round(0, Load64(p)), 27) * kLaneMul + kMixMul;
  for (; n > 0; ++p, --n) h = Rotl(h ^ (static_cast<uint8_t>(*p) * kMixMul), 11) * kLaneMul;
  return Avalanche(h);
}

}  // namespace

uint64_t Checksum64(std::string_view data) {
  uint64_t lanes[4] = {kLaneMul + kMixMul, kMixMul, 0, 0 - kLaneMul};
  const size_t done = ConsumeStripes(lanes, data.data(), data.size());
  return Finalize(lanes, data.size(), data.data() + done, data.size() - done);
}

Checksum64Stream::Checksum64Stream() : lanes_{kLaneMul + kMixMul, kMixMul, 0, 0 - kLaneMul} {}

void Checksum64Stream::Update(std::string_view data) {
  total_bytes_ += data.size();
  const char* p = data.data();
  size_t n = data.size();
  if (num_pending_ > 0) {
    const size_t take = std::min(n, kStripe - num_pending_);
    std::memcpy(pending_ + num_pending_, p, take);
    num_pending_ += take;
    p += take;
    n -= take;
    if (num_pending_ < kStripe) return;
    ConsumeStripes(lanes_, pending_, kStripe);
    num_pending_ = 0;
  }
  const size_t done = ConsumeStripes(lanes_, p, n);
  num_pending_ = n - done;
  std::memcpy(pending_, p + done, num_pending_);
}

uint64_t Checksum64Stream::Finish() const { return Finalize(lanes_, total_bytes_, pending_, num_pending_); }

std::string HexEncode(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * bytes.size(), '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

bool HexDecode(std::string_view hex, std::span<uint8_t> out) {
  if (hex.size() != 2 * out.size()) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace flashserve::base
