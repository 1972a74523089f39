// Engram n-gram hashing of DeepSeek-V4.1 (v4-architecture.md section 5.4): the per-layer odd
// multipliers (drawn exactly as numpy's default_rng(10007 * layer).integers(0, bound, n) then
// * 2 + 1: SeedSequence -> PCG64 (XSL-RR) -> Lemire bounded integers), the prime bucket sizes
// drawn upward from engram_vocab_size and never reused, per-layer bucket offsets, and the row
// ids of the n-grams ending at a position. Built by the weight loader (table sizes) and the
// engine's Model (hashing). Pure data after construction; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/config.h"

namespace flashserve::model {

// numpy.random.default_rng(seed) restricted to what Engram needs.
class NumpyDefaultRng {
 public:
  explicit NumpyDefaultRng(uint64_t seed);
  uint64_t NextUint64();
  // Generator.integers(0, high, dtype=int64) for high > 2^32 (the Lemire path numpy takes).
  int64_t Integer(int64_t high);

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
};

class EngramHasher {
 public:
  // Needs config.engram to be valid (ValidateV41Config).
  explicit EngramHasher(const ModelConfig& config);

  int num_columns() const { return columns_; }  // (max_ngram - 1) * heads
  int lookback() const { return max_ngram_ - 1; }
  // Rows of table `engram_index` for the n-grams ending at a token: grams[0] is the token's
  // compressed id, grams[s] the id s positions back (the pad's id where the sequence had not
  // started). Writes num_columns() row ids.
  void RowIds(int engram_index, std::span<const int64_t> grams, int64_t* rows) const;
  // Rows a layer's table needs (the last bucket's end).
  int64_t TableRows(int engram_index) const;
  const std::vector<int64_t>& multipliers(int engram_index) const { return multipliers_[engram_index]; }
  const std::vector<int64_t>& primes(int engram_index) const { return primes_[engram_index]; }

 private:
  int max_ngram_ = 0, heads_ = 0, columns_ = 0;
  std::vector<std::vector<int64_t>> multipliers_;  // [layer][max_ngram]
  std::vector<std::vector<int64_t>> primes_;       // [layer][(n-1) * heads], n-gram major
  std::vector<std::vector<int64_t>> offsets_;      // [layer][(n-1) * heads]
};

}  // namespace flashserve::model
