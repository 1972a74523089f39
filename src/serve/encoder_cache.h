// EncoderCache: vision-tower outputs (aligner rows) by picture content key, in memory (decoded,
// bounded by bytes, oldest out first) and in the KV store as `image` objects under a TTL class,
// so they survive restarts and are shared through the store's disk and shared tiers, and so
// transfers can carry them between workers. Thread-safe; Find with outer tiers blocks on I/O
// (encode thread, never the engine thread).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/shared_bytes.h"
#include "kvstore/kv_store.h"
#include "serve/service.h"

namespace flashserve::serve {


struct EncoderStats {
  int64_t hits = 0;        // pictures found in memory or the store
  int64_t store_hits = 0;  // of those, found only in the KV store (a restart, another worker)
  int64_t misses = 0;      // pictures run through the tower
  int64_t bytes = 0;       // decoded rows held in memory
  int64_t imported = 0;    // pictures received from other workers
  double encode_seconds = 0;
};

// The `image` object payload: "FSIR", u32 version 1, i64 rows, i64 columns, then rows x columns
// little-endian f32 (the store and the transfer frames checksum it).
base::SharedBytes EncodeImageRows(const std::vector<float>& rows, int64_t columns);
base::Result<ImageRows> DecodeImageRows(std::string_view payload, int64_t columns);

class EncoderCache {
 public:
  // hidden: the model width (columns of every row). store may be null (memory only).
  EncoderCache(int64_t hidden, int64_t memory_bytes, kvstore::KvStore* store, std::string ttl_class);

  // Memory, then the store's L1, then (outer_tiers) its disk and shared tiers. Null: a miss.
  // Counts a hit when found; the caller counts the miss by encoding (Insert).
  ImageRows Find(const ImageKey& key, bool outer_tiers);
  // After a tower run: kept in memory and written to the store.
  void Insert(const ImageKey& key, ImageRows rows, double encode_seconds);
  // A picture's payload for a transfer (memory first, then the store's L1); null when absent.
  base::SharedBytes Export(const ImageKey& key);
  // A payload from another worker: checked, kept in memory and in the store.
  base::Status Import(const ImageKey& key, const base::SharedBytes& payload);
  EncoderStats stats() const;

 private:
  void Remember(const ImageKey& key, ImageRows rows);  // mu_ held
  void Persist(const ImageKey& key, const ImageRows& rows, base::SharedBytes payload);

  const int64_t hidden_;
  const int64_t memory_bytes_;
  kvstore::KvStore* store_;
  const std::string ttl_class_;
  mutable std::mutex mu_;
  std::map<ImageKey, ImageRows> rows_;
  std::deque<ImageKey> order_;  // insertion order, for eviction
  EncoderStats stats_;
};

}  // namespace flashserve::serve
