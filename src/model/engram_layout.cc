// Engram hashing (model/engram_layout.h). The generator follows numpy's published algorithms
// (bit_generator.pyx SeedSequence, pcg64.h, distributions.c bounded_lemire_uint64); the test
// pins values numpy 1.24 printed.
#include "model/engram_layout.h"

#include <limits>
#include <set>

#include "base/check.h"

namespace flashserve::model {
namespace {

// SeedSequence(seed).generate_state(4, uint64) for a seed below 2^64, pool size 4.
void SeedSequenceState(uint64_t seed, uint64_t out[4]) {
  constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
  constexpr uint32_t kMixL = 0xca01f9dd, kMixR = 0x4973f715;
  std::vector<uint32_t> entropy;
  for (uint64_t v = seed; v != 0; v >>= 32) entropy.push_back(static_cast<uint32_t>(v));
  if (entropy.empty()) entropy.push_back(0);
  uint32_t hash_const = kInitA;
  auto hashmix = [&](uint32_t value) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    return value ^ (value >> 16);
  };
  auto mix = [](uint32_t x, uint32_t y) {
    uint32_t r = kMixL * x - kMixR * y;
    return r ^ (r >> 16);
  };
  uint32_t pool[4];
  for (int i = 0; i < 4; ++i) pool[i] = hashmix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0);
  for (int src = 0; src < 4; ++src)
    for (int dst = 0; dst < 4; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
  for (size_t src = 4; src < entropy.size(); ++src)
    for (int dst = 0; dst < 4; ++dst) pool[dst] = mix(pool[dst], hashmix(entropy[src]));
  uint32_t words[8];
  hash_const = kInitB;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = pool[i % 4] ^ hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    words[i] = v ^ (v >> 16);
  }
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint64_t>(words[2 * i]) | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
}

constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(2549297995355413924ULL) << 64) | 4865540595714422341ULL;

bool IsPrime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

}  // namespace

NumpyDefaultRng::NumpyDefaultRng(uint64_t seed) {
  uint64_t v[4];
  SeedSequenceState(seed, v);
  const unsigned __int128 init_state = (static_cast<unsigned __int128>(v[0]) << 64) | v[1];
  const unsigned __int128 init_seq = (static_cast<unsigned __int128>(v[2]) << 64) | v[3];
  inc_ = (init_seq << 1) | 1;
  state_ = 0;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += init_state;
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyDefaultRng::NextUint64() {
  state_ = state_ * kPcgMultiplier + inc_;
  const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

int64_t NumpyDefaultRng::Integer(int64_t high) {
  FS_CHECK(high > (int64_t{1} << 32), "only the 64-bit bounded path is implemented");
  const uint64_t range = static_cast<uint64_t>(high);  // numpy: rng = high - 1, rng_excl = high
  unsigned __int128 m = static_cast<unsigned __int128>(NextUint64()) * range;
  uint64_t leftover = static_cast<uint64_t>(m);
  if (leftover < range) {
    const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - (range - 1)) % range;
    while (leftover < threshold) {
      m = static_cast<unsigned __int128>(NextUint64()) * range;
      leftover = static_cast<uint64_t>(m);
    }
  }
  return static_cast<int64_t>(m >> 64);
}

EngramHasher::EngramHasher(const ModelConfig& c) {
  const EngramConfig& e = c.engram;
  max_ngram_ = e.max_ngram_size;
  heads_ = e.num_heads;
  columns_ = (max_ngram_ - 1) * heads_;
  const int64_t bound = std::max<int64_t>(1, std::numeric_limits<int64_t>::max() / e.compressed_vocab_size / 2);
  std::set<int64_t> seen;
  for (int layer : e.layer_ids) {
    NumpyDefaultRng rng(10007ULL * static_cast<uint64_t>(layer));
    std::vector<int64_t> mult;
    for (int i = 0; i < max_ngram_; ++i) mult.push_back(rng.Integer(bound) * 2 + 1);
    multipliers_.push_back(mult);
    std::vector<int64_t> primes, offsets;
    int64_t total = 0;
    for (int n = 0; n < max_ngram_ - 1; ++n) {
      int64_t current = e.vocab_size - 1;
      for (int h = 0; h < heads_; ++h) {
        do ++current; while (!IsPrime(current) || seen.count(current));
        seen.insert(current);
        primes.push_back(current);
        offsets.push_back(total);
        total += current;
      }
    }
    primes_.push_back(primes);
    offsets_.push_back(offsets);
  }
}

void EngramHasher::RowIds(int index, std::span<const int64_t> grams, int64_t* rows) const {
  const std::vector<int64_t>& mult = multipliers_[static_cast<size_t>(index)];
  const std::vector<int64_t>& primes = primes_[static_cast<size_t>(index)];
  const std::vector<int64_t>& offsets = offsets_[static_cast<size_t>(index)];
  // Ids < 2^24 and multipliers < 2^63 / vocab: no product overflows.
  int64_t rolling = grams[0] * mult[0];
  for (int s = 1; s < max_ngram_; ++s) {
    rolling ^= grams[static_cast<size_t>(s)] * mult[static_cast<size_t>(s)];
    for (int h = 0; h < heads_; ++h) {
      const int col = (s - 1) * heads_ + h;
      rows[col] = rolling % primes[static_cast<size_t>(col)] + offsets[static_cast<size_t>(col)];
    }
  }
}

int64_t EngramHasher::TableRows(int index) const {
  return offsets_[static_cast<size_t>(index)].back() + primes_[static_cast<size_t>(index)].back();
}

}  // namespace flashserve::model
