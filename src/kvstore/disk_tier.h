// DiskTier: one directory tier of the KV store (L2 local or L3 shared): its index rebuilt by
// scanning <root>/<fingerprint>, checked reads, budgeted atomic writes with expired-first then
// least-valuable eviction, rate-limited GC, and write disabling after errors. Thread-safe; KvStore
// calls it from I/O threads, the GC thread and (index lookups only) the engine thread.
// Its StoreTier part is what it shares with L1 (memory_tier.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "kvstore/file_system.h"
#include "kvstore/io_pool.h"
#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "kvstore/store_tier.h"
#include "kvstore/tier_index.h"

namespace flashserve::kvstore {

struct DiskTierOptions {
  Tier tier = Tier::kDisk;
  std::string root;
  std::string fingerprint;
  int64_t capacity_bytes = 0;
  int64_t write_retry_seconds = 30;
  double prior_bytes_per_second = 1e9;
  bool direct_io = false;  // reads through FileSystem::ReadWholeFilesDirect where it has that path
  ReadBufferPool* read_buffers = nullptr;  // direct reads' memory (the store's L1 pool); direct_io only
};

class DiskTier final : public StoreTier {
 public:
  DiskTier(DiskTierOptions options, const ClassTable& classes, FileSystem& fs, const base::Clock& clock);

  // Creates <root>/<fingerprint>.
  base::Status Prepare();
  // Indexes the directory with num_threads threads. A full scan replaces the index; an
  // incremental one (L3 rescans) adds new objects and drops entries whose files vanished (none
  // where a directory could not be listed: an NFS error is no deletion).
  // Corrupt and foreign objects are deleted and counted; stale temporary files are deleted.
  void Scan(int num_threads, bool full);

  Tier tier() const override { return options_.tier; }
  bool Holds(const ObjectKey& key, int64_t now) const override;
  // Whether a write-through with this expiry is worth queuing (false when the tier holds the key
  // with an expiry within `slack`, a write is queued, or writes are disabled: then counted dropped).
  bool ShouldWrite(const ObjectKey& key, int64_t file_bytes, int64_t expiry, int64_t slack);
  // Releases a write ShouldWrite admitted that will not be queued after all (counted dropped).
  void AbandonWrite(const ObjectKey& key);
  // Writes an object queued by ShouldWrite, evicting to fit the budget first.
  void Write(const ObjectHeader& header, const Payload& payload);

  struct ReadResult {
    Verdict verdict = Verdict::kMissing;
    ObjectHeader header;
    Payload payload;
    int64_t file_bytes = 0;
  };
  // Reads and checks objects; the disk sees the files together (one direct batch,
  // FileSystem::ReadWholeFilesDirect, or readahead hints for all first). Unindexed keys are read
  // only when probe is set. Bad objects are deleted and counted; a missing file drops its index
  // entry. on_result(position in keys, result) runs once per key, on this thread, as each is read.
  void ReadMany(std::span<const ObjectKey> keys, bool probe,
                const std::function<void(size_t, ReadResult)>& on_result);
  ReadResult Read(const ObjectKey& key, bool probe);
  int64_t CollectExpired(RateLimiter& limiter, const std::atomic<bool>* cancel) override;
  void Touch(const ObjectKey& key, int64_t now) override;

  TierStats Stats() const override;
  // KV events: see TierIndex::Observer (set before Scan to announce what a scan finds).
  void SetObserver(TierIndex::Observer observer);
  void ForEachObject(int64_t now, const std::function<void(const ObjectKey&, int64_t expiry)>& fn) const override;
  void AddClassStats(std::vector<ClassStats>* classes) const override;
  // Fetch bandwidth from this tier (KvStore measures whole Fetch calls: parallel reads,
  // readahead and stragglers included).
  void RecordFetch(int64_t bytes, double seconds) { meter_.Record(bytes, seconds); }
  double BytesPerSecond() const { return meter_.BytesPerSecond(); }
  const std::string& root() const { return options_.root; }

 private:
  struct Found {
    ObjectKey key;
    IndexEntry entry;
    bool unread = false;  // its header could not be read (an I/O error): a rescan keeps its entry
  };
  std::string PathOf(const ObjectKey& key) const;
  // Direct-I/O tiers drop what their buffered reads (index scans, fallbacks) brought into the
  // page cache.
  CacheUse cache_use() const { return options_.direct_io ? CacheUse::kDrop : CacheUse::kKeep; }
  std::string FingerprintDir() const;
  // Both return false where a directory could not be listed (its entries are then unknown).
  bool ScanShard(const std::vector<std::string>& shard_dirs, std::vector<Found>* found);
  bool ScanLeaf(const std::string& dir, std::vector<Found>* found);
  // Drops key from the index because its file is being deleted or is gone (mu_ held); a scan
  // running meanwhile does not index it again.
  void Forget(const ObjectKey& key, IndexEntry* erased = nullptr);
  // Ends the deletion of a key marked busy (mu_ held). If its file was deleted, a scan running
  // now, which may have read it before it went, does not index it again.
  void FinishRemoval(const ObjectKey& key, bool deleted);
  // Counts a read's outcome, updates the index (deletes a bad object) and makes its result.
  // was_indexed: the key was in the index when the read began (false: an L3 probe).
  ReadResult Account(const ObjectKey& key, const std::string& path, int64_t now, bool was_indexed, ReadOutcome out);
  // Unindexes a bad object, deletes its file and counts it (the key busy meanwhile). In L3 only
  // a file still bad when checked again goes (RemoveObjectUnlessLive): another worker may have
  // replaced it since it was read, and such a replacement is indexed instead.
  void RemoveBad(const ObjectKey& key, const std::string& path, Verdict verdict, const std::string& detail);
  // The verdict of the check before the delete (RemoveObjectUnlessLive; L2: `verdict`, or
  // kIoError where the delete failed).
  Verdict DeleteBadFile(const ObjectKey& key, const std::string& path, Verdict verdict);
  bool RemoveLocalFile(const std::string& path);  // deletes without a check; false = failed (logged)
  void RemoveMisplaced(const std::string& path);  // an object file under another key's directory
  void CountDeleted(Verdict verdict);             // mu_ held
  // GC of one expired key: kExpired (deleted), kIoError (kept), else kOk (renewed by another
  // worker: appended to renewed) or kMissing (gone already).
  Verdict DeleteExpiredFile(const ObjectKey& key, std::vector<Found>* renewed);
  IndexEntry EntryFor(const ObjectHeader& header, int64_t file_bytes, int64_t last_use) const;
  void Upsert(const ObjectKey& key, const IndexEntry& fresh);  // mu_ held; keeps hits and recency
  bool WritesAllowed(int64_t now) const;  // mu_ held
  void OnWriteResult(const ObjectHeader& header, int64_t file_bytes, uint64_t epoch, const base::Status& status);
  // Picks victims (expired first) until `bytes` for key fit, counting key's current file as
  // replaced; false when they cannot. mu_ held.
  bool MakeRoom(const ObjectKey& key, int64_t bytes, int64_t now, std::vector<std::pair<ObjectKey, bool>>* victims);
  // Evicts (deleting files) until the index fits the budget; mu_ not held.
  void TrimToBudget();
  // Picks victims (expired first) until `extra` more bytes fit; false when they cannot. mu_ held.
  bool EvictFor(int64_t extra, int64_t now, std::vector<std::pair<ObjectKey, bool>>* victims);
  void RemoveVictims(const std::vector<std::pair<ObjectKey, bool>>& victims);

  const DiskTierOptions options_;
  const ClassTable& classes_;
  FileSystem& fs_;
  const base::Clock& clock_;
  BandwidthMeter meter_;

  mutable std::mutex mu_;
  TierIndex index_;
  std::unordered_set<ObjectKey, ObjectKeyHasher> busy_;  // queued or being written / deleted
  int scans_running_ = 0;
  std::unordered_set<ObjectKey, ObjectKeyHasher> removed_during_scan_;  // Forget()s while scans run
  int64_t reserved_bytes_ = 0;                           // writes in flight
  TierStats stats_;                                      // counters only; sizes come from index_
  base::LogThrottle read_error_log_{10};                 // per tier: one failing disk hides no other
  int64_t retry_at_ = 0;
  int64_t bytes_at_failure_ = 0;
  uint64_t failure_epoch_ = 0;  // bumped per failure: only a write started after it re-enables
};

}  // namespace flashserve::kvstore
