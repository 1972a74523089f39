// Philox4x32-10, the counter-based random generator (Salmon et al., SC'11): a pure function
// of (key, counter), so a request's random numbers depend only on its seed and position,
// never on batch order or on how many numbers other requests drew. Header-only, any thread.
#pragma once

#include <array>
#include <cstdint>

namespace flashserve::sampler {

inline std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * counter[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

// Uniform in (0, 1) for (seed, position, index): 24 random bits, never exactly 0 or 1.
inline float UniformAt(uint64_t seed, int64_t position, uint32_t index, uint32_t stream = 0) {
  const auto out = Philox4x32({static_cast<uint32_t>(position), static_cast<uint32_t>(static_cast<uint64_t>(position) >> 32),
                               index, stream},
                              {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return (static_cast<float>(out[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

}  // namespace flashserve::sampler
