// Seeded random numbers for datasets and arrival times: Rng (std::mt19937_64 with the draws
// defined here, so one seed gives the same numbers with every standard library) and
// PoissonArrivals. Callers: dataset, runner. Not thread-safe: each user owns its instance.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace flashserve::loadgen {

// SplitMix64 of (seed, stream, index): independent generator seeds for "prefix 3", "job 17", ...
inline uint64_t MixSeed(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed;
  for (uint64_t part : {stream, index}) {
    z += 0x9E3779B97F4A7C15ull + part;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
  }
  return z;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  Rng(uint64_t seed, uint64_t stream, uint64_t index) : engine_(MixSeed(seed, stream, index)) {}

  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi], both inclusive (lo <= hi). The modulo bias is below 2^-40 for the
  // small spans used here.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(engine_() % span);
  }
  // Exponentially distributed with the given rate (> 0): mean 1 / rate.
  double Exponential(double rate) { return -std::log1p(-Uniform()) / rate; }

 private:
  std::mt19937_64 engine_;
};

// Arrival times of a Poisson process: gaps are exponential with mean 1 / rate. An infinite rate
// sends everything at time 0.
class PoissonArrivals {
 public:
  static constexpr uint64_t kStream = 0xA7;
  PoissonArrivals(double rate, uint64_t seed) : rate_(rate), rng_(seed, kStream, 0) {}
  // Seconds from the start of the run to the next arrival; non-decreasing.
  double Next() {
    if (std::isinf(rate_)) return 0.0;
    time_s_ += rng_.Exponential(rate_);
    return time_s_;
  }

 private:
  double rate_;
  double time_s_ = 0.0;
  Rng rng_;
};

}  // namespace flashserve::loadgen
