// KvStore: the persistent, tiered prefix-cache store (design.md section 5): L1 host DRAM, L2 a
// local directory, L3 a directory shared by many workers, with TTL classes, GC and checksums.
// Called by serve (engine thread), its own I/O threads and its GC thread; every method is thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/shared_bytes.h"
#include "kv/block_hash.h"
#include "kv/resume.h"
#include "protocol/cluster.h"

namespace flashserve::kvstore {

class FileSystem;

// The prefix cache's vocabulary (kv/resume.h): kinds, tiers and keys of the objects stored.
using ObjectKind = kv::ObjectKind;  // kBlock = 1 (a 128-token block), kBoundary = 2 (a snapshot at its end)
using Tier = kv::Tier;              // kMemory = 0 (L1 host DRAM), kDisk = 1 (L2 local dir), kShared = 2 (L3)
using kv::kNumTiers;
using ObjectKey = kv::ObjectKey;
using ObjectKeyHasher = kv::ObjectKeyHasher;

struct TtlClass {
  std::string name;  // [a-z0-9_-], 1..32 characters
  int64_t seconds = 0;
};

// The defaults: agent 3 days, chat 7 days.
std::vector<TtlClass> DefaultTtlClasses();
// I/O threads by default: one per 4 cores, 2 to 8 (more threads keep more direct reads in
// flight; docs/benchmarks.md, "KV store", has the restore rate by thread count).
int DefaultIoThreads();
inline const char* TierName(Tier tier) { return protocol::KvTierName(tier); }  // "memory", "disk", "shared"
// "block", "boundary" (also the object file suffix)
inline const char* KindName(ObjectKind kind) { return protocol::KvObjectKindName(kind); }

struct StoreConfig {
  std::string fingerprint;                  // model fingerprint (hex); objects of another one are foreign
  int64_t memory_bytes = 1 << 30;           // L1 budget
  std::string disk_dir;  int64_t disk_bytes = 0;      // L2 (empty dir = off), private to this process
  std::string shared_dir; int64_t shared_bytes = 0;   // L3 (empty dir = off), mounted by many workers (NFS/CephFS/3FS)
  std::vector<TtlClass> ttl_classes;        // empty = defaults
  std::string default_ttl_class = "chat";
  int64_t gc_delay_seconds = 3600;          // expired objects are deleted within this delay
  int64_t gc_max_deletes_per_second = 200;  // so GC never stalls foreground reads
  int io_threads = DefaultIoThreads();
  // Additions beyond the core contract.
  bool direct_io = false;                   // L2/L3 reads: O_DIRECT in io_uring batches, no page cache
  bool background_gc = true;                // false: GC runs only through CollectGarbage() (tests, tools)
  int64_t shared_rescan_seconds = 300;      // re-index L3 this often to see other workers' objects (0 = never)
  bool shared_probe_on_miss = true;         // Fetch checks the L3 directory for keys its index lacks
  int64_t write_retry_seconds = 30;         // a tier whose writes failed is retried after this back-off
  int64_t max_pending_write_bytes = 256 << 20;  // write-through backlog cap; beyond it writes are dropped
  int64_t event_log_capacity = 1 << 16;     // KV events kept for the router (older ones: resync)
  FileSystem* file_system = nullptr;        // the file-system seam (null = POSIX); not owned

  base::Status Validate() const;
  // The effective classes (ttl_classes or the defaults).
  std::vector<TtlClass> Classes() const;
};

struct TierStats {
  int64_t objects = 0, bytes = 0, capacity = 0, hits = 0, misses = 0, bytes_read = 0, bytes_written = 0,
          evictions = 0, expirations = 0, corrupt = 0, write_errors = 0, gc_backlog = 0;
  bool writable = true;
  std::string write_disabled_reason;
  // Additions.
  int64_t foreign = 0;          // objects of another model found under this model's folder (deleted)
  int64_t read_errors = 0;      // I/O errors on read (a miss; the object is kept)
  int64_t writes_dropped = 0;   // write-throughs skipped (tier disabled, backlog full, no room)
  int64_t pinned = 0;           // L1 objects pinned by running sequences
  double read_bytes_per_second = 0;  // measured Fetch bandwidth (0 = no fetch read this tier yet)
  int64_t indexed_objects = 0;  // objects found by the last directory scan
  double index_seconds = 0;     // how long that scan took
  int64_t scans = 0;            // directory scans finished (at open, then L3 rescans)
  int64_t incomplete_scans = 0;  // of those, ones that could not list or read every file
};

struct ClassStats {
  std::string name;
  int64_t seconds = 0;
  int64_t objects[kNumTiers] = {0, 0, 0};
  int64_t bytes[kNumTiers] = {0, 0, 0};
};

struct StoreStats {
  TierStats tiers[kNumTiers];
  std::vector<ClassStats> classes;  // configured classes, then "other" (classes found on disk only)
  int64_t pending_writes = 0, pending_write_bytes = 0;
};

// Immutable object bytes, shared (not copied) between the tiers, the engine and transfers.
using Payload = base::SharedBytes;

class KvStore {
 public:
  // Validates the config, creates <dir>/<fingerprint> for each configured directory, indexes what
  // is already there (in parallel, logging objects/s) and starts the I/O and GC threads.
  static base::Result<std::unique_ptr<KvStore>> Open(const StoreConfig& config, const base::Clock& clock);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // L1 only, never does I/O (engine thread). Null when absent or expired; counted as an L1 hit
  // or miss, except a miss where !count_miss (a lookup of what may never have been stored, such
  // as a boundary snapshot at a block that was no persist point).
  Payload GetMemory(const ObjectKey& key, bool count_miss = true);
  // Fastest tier holding an unexpired copy per the in-memory indexes, no I/O.
  std::optional<Tier> Locate(const ObjectKey& key) const;
  // Loads objects held only in L2/L3 into L1 on I/O threads, then calls done (on an I/O thread)
  // with, per key, whether it is now in L1. Corrupt / truncated / foreign / expired objects count
  // as misses and are deleted (and counted). With pin, every key reported present is pinned once
  // (the caller Unpins it), so it cannot be evicted before the caller reads it.
  void Fetch(std::vector<ObjectKey> keys, std::function<void(std::vector<bool>)> done, bool pin = false);
  // Inserts into L1 and writes through to L2 (and L3) asynchronously, tagged with its TTL class
  // (empty = default; unknown = default, logged once) and the prompt tokens it covers. Expiry is
  // now + the class TTL; a Put of a held key extends its expiry (disk copies are rewritten only
  // when that moves expiry by more than a quarter of the TTL).
  void Put(const ObjectKey& key, Payload payload, int64_t tokens, const std::string& ttl_class);
  // Refreshes recency / hit counts in every tier and pins the L1 copy (a pinned object is never
  // evicted from L1). Returns whether an L1 copy was pinned; Unpin only what was pinned.
  bool Pin(const ObjectKey& key);
  void Unpin(const ObjectKey& key);  // releases one pin
  StoreStats Stats() const;
  // Deletes expired objects now (all tiers, disk deletes rate-limited); returns how many.
  int64_t CollectGarbage();
  // Predicted seconds to fetch `bytes` from a tier: bytes / the moving average of real Fetch
  // bandwidth (bytes read / Fetch wall time, all I/O threads together; a prior until the first).
  double PredictFetchSeconds(Tier tier, int64_t bytes) const;
  // KV events for the router (design.md section 6): numbered changes of what the tiers hold,
  // since event `after`; and a snapshot of every unexpired object as of its `seq`.
  protocol::KvEventPage Events(uint64_t after, size_t max) const;
  protocol::KvSnapshot Snapshot() const;
  // Blocks until every queued write-through and fetch has finished.
  void Flush();
  // Flushes pending writes and stops the threads; later Fetches report misses, Puts stay in L1.
  void Close();

 private:
  struct Impl;
  explicit KvStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::kvstore
