// KvStore (kvstore/kv_store.h): the tiers together (L1 memory_tier.cc, L2/L3 disk_tier.cc, both
// StoreTiers), write-through, fetches, GC; threads in io_pool.cc.
#include "kvstore/kv_store.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <set>
#include <span>
#include <thread>

#include "base/log.h"
#include "kvstore/disk_tier.h"
#include "kvstore/event_log.h"
#include "kvstore/io_pool.h"
#include "kvstore/memory_tier.h"
#include "kvstore/tier_index.h"

namespace flashserve::kvstore {
namespace {

constexpr double kDiskPriorBytesPerSecond = 1e9;  // until fetches are measured
constexpr double kSharedPriorBytesPerSecond = 2.5e8;

// What the direct-read pool may hold beyond L1's budget, mapped and resident while free: a
// sixteenth of the budget (page rounding and headers of the payloads L1 counts by size) plus
// 32 MiB per I/O thread (reads in flight and read but not yet checked); none without direct I/O.
size_t ReadBufferMargin(const StoreConfig& c) {
  if (!c.direct_io) return 0;
  return static_cast<size_t>(c.memory_bytes) / 16 + static_cast<size_t>(c.io_threads) * (size_t{32} << 20);
}

}  // namespace

struct KvStore::Impl {
  Impl(const StoreConfig& c, const base::Clock& clk)
      : config(c),
        clock(clk),
        fs(c.file_system != nullptr ? *c.file_system : *FileSystem::Posix()),
        classes(c.Classes()),
        default_class(classes.Id(c.default_ttl_class)),
        read_buffers(c.direct_io ? static_cast<size_t>(c.memory_bytes) + ReadBufferMargin(c) : 0,  // capacity
                     ReadBufferPool::kDefaultSlabBytes, /*retain=*/ReadBufferMargin(c)),
        memory(c.memory_bytes, clk),
        gc_limiter(c.gc_max_deletes_per_second),
        events(static_cast<size_t>(c.event_log_capacity), NewEpoch()) {
    memory.SetObserver(ObserverFor(Tier::kMemory));
    tiers.push_back(&memory);
  }

  TierIndex::Observer ObserverFor(Tier tier) {
    return [this, tier](const ObjectKey& key, bool stored, int64_t expiry) { events.Append(tier, key, stored, expiry); };
  }

  DiskTier* disk(Tier t) const { return disks[static_cast<int>(t)].get(); }
  void AddDiskTier(std::unique_ptr<DiskTier> tier);
  uint8_t ResolveClass(const std::string& name);
  // Loads keys[begin, end): L1 hits, then the rest from L2 as one batch, then what L2 lacked
  // from L3; adds the bytes read per tier.
  void FetchChunk(const std::vector<ObjectKey>& keys, size_t begin, size_t end, bool pin, std::vector<uint8_t>* present,
                  std::atomic<int64_t>* bytes_read);
  void RecordFetch(const std::atomic<int64_t>* bytes_read, int64_t start_nanos);
  void QueueWrite(DiskTier* tier, const ObjectHeader& header, const Payload& payload, int64_t slack);
  int64_t CollectGarbage();
  void GcLoop();
  void LogIndex(const DiskTier& tier) const;

  const StoreConfig config;
  const base::Clock& clock;
  FileSystem& fs;
  const ClassTable classes;
  const uint8_t default_class;
  // Direct reads land here and their payloads stay here in L1: L1's budget plus a margin
  // (slabs are mapped as needed; free memory beyond the margin goes back to the kernel).
  ReadBufferPool read_buffers;
  MemoryTier memory;                           // L1
  std::unique_ptr<DiskTier> disks[kNumTiers];  // [kDisk], [kShared]; null when off
  std::vector<DiskTier*> outer;                // the disk tiers configured, L2 first
  std::vector<StoreTier*> tiers;               // every tier configured, fastest first

  std::unique_ptr<IoPool> io;
  std::atomic<int64_t> pending_writes{0}, pending_write_bytes{0};
  RateLimiter gc_limiter;
  std::atomic<bool> closing{false};
  std::mutex gc_mu;
  std::condition_variable gc_wake;
  std::thread gc_thread;
  std::mutex warn_mu;
  // Names come from requests: each is logged once, and only the first few are remembered.
  static constexpr size_t kMaxWarnedClasses = 64;
  std::set<std::string> warned_classes;
  EventLog events;
};

uint8_t KvStore::Impl::ResolveClass(const std::string& name) {
  if (name.empty()) return default_class;
  const uint8_t id = classes.Id(name);
  if (id != kOtherClass) return id;
  std::lock_guard<std::mutex> lock(warn_mu);
  if (warned_classes.size() < kMaxWarnedClasses && warned_classes.insert(name).second) {
    FS_LOG(kWarning, "kvstore: unknown TTL class '{}', using '{}'{}", name, config.default_ttl_class,
           warned_classes.size() == kMaxWarnedClasses ? " (further unknown names are not logged)" : "");
  }
  return default_class;
}

void KvStore::Impl::AddDiskTier(std::unique_ptr<DiskTier> tier) {
  outer.push_back(tier.get());
  tiers.push_back(tier.get());
  disks[static_cast<int>(tier->tier())] = std::move(tier);
}

void KvStore::Impl::QueueWrite(DiskTier* tier, const ObjectHeader& header, const Payload& payload, int64_t slack) {
  const int64_t size = static_cast<int64_t>(payload->size());
  const int64_t file_bytes = static_cast<int64_t>(EncodedHeaderBytes(header)) + size;
  if (!tier->ShouldWrite(header.key, file_bytes, header.expiry_unix, slack)) return;
  if (pending_write_bytes.load() + size > config.max_pending_write_bytes) {
    tier->AbandonWrite(header.key);  // counted as dropped
    return;
  }
  pending_writes.fetch_add(1);
  pending_write_bytes.fetch_add(size);
  const bool queued = io->Submit(IoPool::Priority::kWrite, [this, tier, header, payload, size] {
    tier->Write(header, payload);
    pending_writes.fetch_sub(1);
    pending_write_bytes.fetch_sub(size);
  });
  if (!queued) {
    tier->AbandonWrite(header.key);
    pending_writes.fetch_sub(1);
    pending_write_bytes.fetch_sub(size);
  }
}

void KvStore::Impl::FetchChunk(const std::vector<ObjectKey>& keys, size_t begin, size_t end, bool pin,
                               std::vector<uint8_t>* present, std::atomic<int64_t>* bytes_read) {
  std::vector<size_t> missing;  // positions in keys
  for (size_t i = begin; i < end; ++i) {
    if (memory.FindAndTouch(keys[i], pin)) {
      (*present)[i] = 1;
    } else {
      missing.push_back(i);
    }
  }
  for (DiskTier* tier : outer) {
    if (missing.empty()) break;
    const Tier t = tier->tier();
    std::vector<ObjectKey> wanted;
    for (size_t i : missing) wanted.push_back(keys[i]);
    std::vector<size_t> still_missing;
    int64_t bytes = 0;
    // Each object goes into L1 as soon as it is read (one chunk's payloads are never all held).
    tier->ReadMany(wanted, /*probe=*/t == Tier::kShared && config.shared_probe_on_miss,
                   [&](size_t j, DiskTier::ReadResult r) {
                     if (r.verdict != Verdict::kOk) {
                       still_missing.push_back(missing[j]);
                       return;
                     }
                     bytes += r.file_bytes;
                     const bool in_memory = memory.Insert(wanted[j], r.payload, r.header.tokens,
                                                          r.header.expiry_unix, classes.Id(r.header.ttl_class), pin);
                     (*present)[missing[j]] = in_memory ? 1 : 0;
                     if (t == Tier::kShared && disk(Tier::kDisk) != nullptr) {
                       QueueWrite(disk(Tier::kDisk), r.header, r.payload, /*slack=*/0);  // local copy of a shared hit
                     }
                   });
    bytes_read[static_cast<int>(t)].fetch_add(bytes);
    std::sort(still_missing.begin(), still_missing.end());  // the next tier reads in prefix order
    missing = std::move(still_missing);
  }
}

void KvStore::Impl::RecordFetch(const std::atomic<int64_t>* bytes_read, int64_t start_nanos) {
  const int64_t shared = bytes_read[static_cast<int>(Tier::kShared)].load();
  const int64_t total = bytes_read[static_cast<int>(Tier::kDisk)].load() + shared;
  if (total == 0) return;
  // The whole Fetch's wall time is charged to the slowest tier it read from.
  disk(shared > 0 ? Tier::kShared : Tier::kDisk)
      ->RecordFetch(total, static_cast<double>(clock.NowNanos() - start_nanos) * 1e-9);
}

void KvStore::Impl::LogIndex(const DiskTier& tier) const {
  const TierStats s = tier.Stats();
  FS_LOG(kInfo, "kvstore: indexed {} objects ({:.1f} MB) under {} in {:.3f} s ({:.0f} objects/s)", s.indexed_objects,
         static_cast<double>(s.bytes) / 1e6, tier.root(), s.index_seconds,
         static_cast<double>(s.indexed_objects) / std::max(s.index_seconds, 1e-9));
}

int64_t KvStore::Impl::CollectGarbage() {
  int64_t deleted = 0;
  for (StoreTier* tier : tiers) deleted += tier->CollectExpired(gc_limiter, &closing);
  return deleted;
}

void KvStore::Impl::GcLoop() {
  const auto interval = std::chrono::milliseconds(std::clamp<int64_t>(config.gc_delay_seconds * 1000 / 4, 100, 60000));
  double next_rescan = base::MonotonicSeconds() + static_cast<double>(config.shared_rescan_seconds);
  std::unique_lock<std::mutex> lock(gc_mu);
  while (!closing.load()) {
    gc_wake.wait_for(lock, interval, [this] { return closing.load(); });
    if (closing.load()) break;
    lock.unlock();
    const int64_t deleted = CollectGarbage();
    if (deleted > 0) FS_LOG(kDebug, "kvstore: gc deleted {} expired objects", deleted);
    if (disk(Tier::kShared) != nullptr && config.shared_rescan_seconds > 0 && base::MonotonicSeconds() >= next_rescan) {
      disk(Tier::kShared)->Scan(1, /*full=*/false);
      next_rescan = base::MonotonicSeconds() + static_cast<double>(config.shared_rescan_seconds);
    }
    lock.lock();
  }
}

KvStore::KvStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvStore::~KvStore() { Close(); }

base::Result<std::unique_ptr<KvStore>> KvStore::Open(const StoreConfig& config, const base::Clock& clock) {
  FS_RETURN_IF_ERROR(config.Validate());
  auto impl = std::make_unique<Impl>(config, clock);
  const struct {
    Tier tier;
    const std::string& dir;
    int64_t bytes;
    double prior;
  } dirs[] = {{Tier::kDisk, config.disk_dir, config.disk_bytes, kDiskPriorBytesPerSecond},
              {Tier::kShared, config.shared_dir, config.shared_bytes, kSharedPriorBytesPerSecond}};
  for (const auto& d : dirs) {
    if (d.dir.empty()) continue;
    DiskTierOptions options{d.tier,  d.dir,           config.fingerprint, d.bytes, config.write_retry_seconds,
                            d.prior, config.direct_io, &impl->read_buffers};
    auto tier = std::make_unique<DiskTier>(options, impl->classes, impl->fs, clock);
    FS_RETURN_IF_ERROR(tier->Prepare());
    tier->SetObserver(impl->ObserverFor(d.tier));
    tier->Scan(config.io_threads, /*full=*/true);
    impl->LogIndex(*tier);
    impl->AddDiskTier(std::move(tier));
  }
  impl->io = std::make_unique<IoPool>(config.io_threads);
  Impl* raw = impl.get();
  if (config.background_gc) raw->gc_thread = std::thread([raw] { raw->GcLoop(); });
  return std::unique_ptr<KvStore>(new KvStore(std::move(impl)));
}

Payload KvStore::GetMemory(const ObjectKey& key, bool count_miss) { return impl_->memory.Get(key, count_miss); }

std::optional<Tier> KvStore::Locate(const ObjectKey& key) const {
  const int64_t now = impl_->clock.NowUnixSeconds();
  for (const StoreTier* tier : impl_->tiers) {
    if (tier->Holds(key, now)) return tier->tier();
  }
  return std::nullopt;
}

void KvStore::Fetch(std::vector<ObjectKey> keys, std::function<void(std::vector<bool>)> done, bool pin) {
  struct State {
    std::vector<ObjectKey> keys;
    std::vector<uint8_t> present;
    std::atomic<size_t> remaining{0};
    std::atomic<int64_t> bytes_read[kNumTiers] = {0, 0, 0};
    int64_t start_nanos = 0;
    std::function<void(std::vector<bool>)> done;
    bool pin = false;
  };
  auto state = std::make_shared<State>();
  state->start_nanos = impl_->clock.NowNanos();
  state->keys = std::move(keys);
  state->present.assign(state->keys.size(), 0);
  state->done = std::move(done);
  state->pin = pin;
  const size_t n = state->keys.size();
  const size_t num_chunks = std::max<size_t>(1, std::min<size_t>(n, static_cast<size_t>(impl_->io->num_threads())));
  state->remaining.store(num_chunks);
  Impl* impl = impl_.get();
  auto finish = [impl, state] {
    if (state->remaining.fetch_sub(1) != 1) return;
    impl->RecordFetch(state->bytes_read, state->start_nanos);
    state->done(std::vector<bool>(state->present.begin(), state->present.end()));
  };
  for (size_t c = 0; c < num_chunks; ++c) {
    const size_t begin = n * c / num_chunks, end = n * (c + 1) / num_chunks;
    auto task = [impl, state, begin, end, finish] {
      impl->FetchChunk(state->keys, begin, end, state->pin, &state->present, state->bytes_read);
      finish();
    };
    if (impl->closing.load() || !impl->io->Submit(IoPool::Priority::kRead, task)) finish();  // closed: misses
  }
}

void KvStore::Put(const ObjectKey& key, Payload payload, int64_t tokens, const std::string& ttl_class) {
  if (payload == nullptr) return;
  const int64_t now = impl_->clock.NowUnixSeconds();
  const uint8_t class_id = impl_->ResolveClass(ttl_class);
  const TtlClass& cls = impl_->classes.classes()[class_id];
  const int64_t expiry = now + cls.seconds;
  impl_->memory.Insert(key, payload, tokens, expiry, class_id, /*pin=*/false);
  if (impl_->closing.load()) return;
  ObjectHeader header;
  header.key = key;
  header.fingerprint = impl_->config.fingerprint;
  header.ttl_class = cls.name;
  header.tokens = tokens;
  header.created_unix = now;
  header.expiry_unix = expiry;
  for (DiskTier* tier : impl_->outer) impl_->QueueWrite(tier, header, payload, cls.seconds / 4);
}

bool KvStore::Pin(const ObjectKey& key) {
  const int64_t now = impl_->clock.NowUnixSeconds();
  for (StoreTier* tier : impl_->tiers) tier->Touch(key, now);
  return impl_->memory.Pin(key);
}

void KvStore::Unpin(const ObjectKey& key) { impl_->memory.Unpin(key); }

StoreStats KvStore::Stats() const {
  StoreStats stats;
  for (const TtlClass& c : impl_->classes.classes()) stats.classes.push_back({c.name, c.seconds, {}, {}});
  stats.classes.push_back({"other", 0, {}, {}});
  for (int t = 1; t < kNumTiers; ++t) {
    stats.tiers[t].writable = false;
    stats.tiers[t].write_disabled_reason = "not configured";
  }
  for (const StoreTier* tier : impl_->tiers) {
    stats.tiers[static_cast<int>(tier->tier())] = tier->Stats();
    tier->AddClassStats(&stats.classes);
  }
  stats.pending_writes = impl_->pending_writes.load();
  stats.pending_write_bytes = impl_->pending_write_bytes.load();
  return stats;
}

int64_t KvStore::CollectGarbage() { return impl_->CollectGarbage(); }

double KvStore::PredictFetchSeconds(Tier tier, int64_t bytes) const {
  if (tier == Tier::kMemory) return 0;
  const DiskTier* d = impl_->disk(tier);
  if (d == nullptr) return std::numeric_limits<double>::infinity();
  return static_cast<double>(bytes) / d->BytesPerSecond();
}

protocol::KvEventPage KvStore::Events(uint64_t after, size_t max) const { return impl_->events.Since(after, max); }

protocol::KvSnapshot KvStore::Snapshot() const {
  protocol::KvSnapshot snapshot;
  snapshot.epoch = impl_->events.epoch();
  snapshot.seq = impl_->events.last_seq();  // before listing: later changes come again as events
  const int64_t now = impl_->clock.NowUnixSeconds();
  auto add = [&snapshot](Tier tier) {
    return [&snapshot, tier](const ObjectKey& key, int64_t expiry) {
      snapshot.objects.push_back({tier, key.kind, key.hash, expiry});
    };
  };
  for (const StoreTier* tier : impl_->tiers) tier->ForEachObject(now, add(tier->tier()));
  return snapshot;
}

void KvStore::Flush() {
  if (!impl_->closing.load()) impl_->io->Drain();
}

void KvStore::Close() {
  if (impl_ == nullptr || impl_->closing.exchange(true)) return;
  {
    // Taken so that the GC thread is either before its predicate check (and sees closing) or
    // already waiting (and gets the notification), never in between.
    std::lock_guard<std::mutex> lock(impl_->gc_mu);
  }
  impl_->gc_wake.notify_all();
  if (impl_->gc_thread.joinable()) impl_->gc_thread.join();
  impl_->io->Stop();  // runs every queued write first
}

}  // namespace flashserve::kvstore
