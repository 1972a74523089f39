// KV store benchmark: (1) bytes per token a V4-Flash-shaped state stores, measured with the
// engine's codec on a generated model with V4-Flash's layer mix; (2) the disk's sequential read
// bandwidth, cold cache, buffered and O_DIRECT (and O_DIRECT while a core copies memory);
// (3) restore throughput from L2 (Fetch into L1), cold and warm cache, with the device's request
// sizes and busy time, against plain reads and unchecked direct batches of the same files, and
// paired Fetch by Fetch with sequential reads of the same size; (4) index rebuild rate at Open.
// Prints; asserts nothing.
// Flags: `kvstore_bench --help` (kUsage below).
// Cold cache = posix_fadvise(DONTNEED) on every file after syncfs (no root needed); as root,
// also every clean page and inode through /proc/sys/vm/drop_caches.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "fmt/format.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "engine/state_codec.h"
#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"

namespace {

namespace fs = std::filesystem;
using namespace flashserve;

struct Flags {
  std::string dir;
  int64_t objects = 2048;
  int64_t object_bytes = 0;  // 0 = the measured V4-Flash block size
  int64_t index_objects = 100000;
  bool cold_metadata = false;  // --cold-metadata: whole-pass restores start without cached inodes
  int io_threads = kvstore::DefaultIoThreads();  // the store's default
  int batch = 32;            // objects per Fetch: 32 blocks = a 4096-token prefix
  int rounds = 3;
  bool skip_model = false;
  bool direct_io = false;  // StoreConfig::direct_io: io_uring + O_DIRECT batches instead of buffered reads
};

double Now() { return base::MonotonicSeconds(); }

// As root: drops every clean cached page, dentry and inode of the machine (after a sync).
void DropAllCachesIfRoot() {
  if (::geteuid() != 0) return;
  ::sync();
  if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w")) {
    std::fputs("3\n", f);
    std::fclose(f);
  }
}

// Drops a file's cached pages (after its data reached the disk).
void DropCache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void SyncAndDropTree(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::syncfs(fd);
    ::close(fd);
  }
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) DropCache(e.path().string());
  }
  DropAllCachesIfRoot();
}

// Bytes per token from the codec: a tiny-width model with V4-Flash's 43-layer schedule.
int64_t MeasureBytesPerToken(const std::string& dir) {
  model::ModelConfig c = model::TinyPreset();
  c.vocab_size = 1280;
  c.num_layers = 43;
  c.compress_ratios = {0, 0};
  for (int i = 0; i < 20; ++i) c.compress_ratios.insert(c.compress_ratios.end(), {4, 128});
  c.compress_ratios.insert(c.compress_ratios.end(), {4, 0});  // last CSA layer, then MTP
  const std::string model_dir = dir + "/flash_shaped_model";
  base::ThreadPool pool(2);
  if (base::Status s = model::WriteRandomCheckpoint(c, model_dir, {}, pool); !s.ok()) {
    std::printf("model: %s\n", s.ToString().c_str());
    return 0;
  }
  auto model = engine::Model::Load(model_dir);
  if (!model.ok()) {
    std::printf("model: %s\n", model.error().ToString().c_str());
    return 0;
  }
  engine::EngineOptions options;  // QAT on: entries take their exact compact FP8 / FP4 form
  options.num_threads = 2;
  engine::Engine engine(**model, options);
  auto state = engine.NewSequence();
  constexpr int kTokens = 512;
  std::vector<int32_t> tokens(kTokens);
  std::mt19937 rng(7);
  for (int32_t& t : tokens) t = 2 + static_cast<int32_t>(rng() % 1270);
  const double t0 = Now();
  engine::ForwardRequest req{state.get(), tokens, engine::LogitsMode::kLast};
  if (auto r = engine.Forward({&req, 1}); !r.ok()) {
    std::printf("forward: %s\n", r.error().ToString().c_str());
    return 0;
  }
  const double forward_s = Now() - t0;
  int64_t block_bytes = 0;
  for (int b = 0; b < kTokens / 128; ++b) {
    block_bytes += static_cast<int64_t>(engine::SerializeBlock(*state, (*model)->config(), (*model)->plan(), b).size());
  }
  engine::StateSizes sizes;
  const std::string boundary = engine::SerializeBoundary(*state, (*model)->config(), (*model)->plan(), &sizes);
  const double per_block = static_cast<double>(block_bytes) / (kTokens / 128);
  const double formula = (21 * (32 * 711.0 + 32 * 68.0) + 20 * 711.0) / 128;
  std::printf("== bytes per token (codec, 43 layers: 2 SWA, 21 CSA, 20 HCA, + MTP; QAT on; %d tokens in %.1f s)\n",
              kTokens, forward_s);
  std::printf("block object payload: %.0f B = %.1f B/token (docs/engine.md formula, entries only: %.1f B/token)\n",
              per_block, per_block / 128, formula);
  std::printf("boundary snapshot: %zu B (rings %lld, carries %lld, entries %lld)\n", boundary.size(),
              static_cast<long long>(sizes.rings), static_cast<long long>(sizes.carries),
              static_cast<long long>(sizes.entries));
  std::printf("with one boundary per 4096-token prompt: %.1f B/token\n",
              per_block / 128 + static_cast<double>(boundary.size()) / 4096);
  fs::remove_all(model_dir);
  return static_cast<int64_t>(per_block);
}

// Writes a file of `bytes` for the sequential-read reference.
std::string WriteSeqFile(const std::string& dir, int64_t bytes) {
  const std::string path = dir + "/seq_read.bin";
  std::string chunk(4 << 20, '\x5a');
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  for (int64_t done = 0; done < bytes; done += static_cast<int64_t>(chunk.size())) {
    if (::write(fd, chunk.data(), chunk.size()) < 0) break;
  }
  ::fsync(fd);
  ::close(fd);
  return path;
}

// Single-stream sequential read of the file, cold, 4 MiB reads: bytes per second.
double SeqReadBandwidth(const std::string& path) {
  DropCache(path);
  DropAllCachesIfRoot();
  std::string buf(4 << 20, '\0');
  int fd = ::open(path.c_str(), O_RDONLY);
  const double t0 = Now();
  int64_t total = 0;
  for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;) total += n;
  const double secs = Now() - t0;
  ::close(fd);
  return static_cast<double>(total) / secs;
}

// Reads a file with O_DIRECT in 4 MiB requests into 2 MiB-aligned huge-page memory (one
// request per read, no page cache), a span at a time from where the last one stopped.
class DirectSeqReader {
 public:
  static constexpr size_t kChunk = size_t{4} << 20, kHuge = size_t{2} << 20;
  DirectSeqReader(const DirectSeqReader&) = delete;
  DirectSeqReader& operator=(const DirectSeqReader&) = delete;
  explicit DirectSeqReader(const std::string& path) {
    raw_ = ::mmap(nullptr, kChunk + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw_ == MAP_FAILED) return;
    buf_ = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw_) + kHuge - 1) & ~(uintptr_t{kHuge} - 1));
    ::madvise(buf_, kChunk, MADV_HUGEPAGE);
    std::memset(buf_, 0, kChunk);
    fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  }
  ~DirectSeqReader() {
    if (fd_ >= 0) ::close(fd_);
    if (raw_ != MAP_FAILED) ::munmap(raw_, kChunk + kHuge);
  }
  bool ok() const { return fd_ >= 0; }
  // Reads whole requests until `total` bytes of the file have been read since it was opened (or
  // its end); returns the bytes this call read.
  int64_t ReadUntil(int64_t total) {
    const int64_t before = done_;
    for (ssize_t n; done_ < total && (n = ::read(fd_, buf_, kChunk)) > 0;) done_ += n;
    return done_ - before;
  }

 private:
  int64_t done_ = 0;
  void* raw_ = MAP_FAILED;
  char* buf_ = nullptr;
  int fd_ = -1;
};

// The whole file that way, cold: bytes per second, or 0 where the file system refuses direct I/O.
double SeqReadDirectBandwidth(const std::string& path) {
  DropCache(path);
  DropAllCachesIfRoot();
  DirectSeqReader reader(path);
  if (!reader.ok()) return 0;
  const double t0 = Now();
  const int64_t total = reader.ReadUntil(int64_t{1} << 62);
  const double secs = Now() - t0;
  return total > 0 ? static_cast<double>(total) / secs : 0;
}

// Read requests the block device completed (and merged) so far, from /sys/dev/block/M:m/stat of
// the device holding dir: how large the requests a method produces are. Zeros where unreadable.
struct DeviceReads {
  int64_t requests = 0, merged = 0, sectors = 0, busy_ms = 0;
  double at = 0;  // when read (monotonic seconds); in a sum of intervals, their seconds
  // Adds the reads between two readings (a sum over intervals, for DescribeRequests({}, sum)).
  void AddInterval(const DeviceReads& before, const DeviceReads& after) {
    requests += after.requests - before.requests;
    merged += after.merged - before.merged;
    sectors += after.sectors - before.sectors;
    busy_ms += after.busy_ms - before.busy_ms;
    at += after.at - before.at;
  }
};
DeviceReads ReadDeviceStats(const std::string& dir) {
  DeviceReads d;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return d;
  const std::string path =
      fmt::format("/sys/dev/block/{}:{}/stat", major(st.st_dev), minor(st.st_dev));
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    long long v[10] = {};
    if (std::fscanf(f, "%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                    &v[6], &v[7], &v[8], &v[9]) == 10) {
      d = {v[0], v[1], v[2], v[9], 0};  // field 10: milliseconds with requests in flight
    }
    std::fclose(f);
  }
  d.at = Now();
  return d;
}
std::string DescribeRequests(const DeviceReads& before, const DeviceReads& after) {
  const int64_t requests = after.requests - before.requests;
  if (requests <= 0) return "device requests unknown";
  return fmt::format("{} device read requests of {:.0f} KB on average ({} merged), device busy {:.0f}% of the time",
                     requests,
                     static_cast<double>(after.sectors - before.sectors) * 512 / 1024 / static_cast<double>(requests),
                     after.merged - before.merged,
                     100.0 * static_cast<double>(after.busy_ms - before.busy_ms) / 1e3 / (after.at - before.at));
}

kvstore::ObjectKey BenchKey(int64_t i) {
  kvstore::ObjectKey key;
  key.hash = kv::Sha256("bench-" + std::to_string(i));
  return key;
}

// The layout's ceiling: plain read() of the same object files, cold, split over `threads`
// threads, no checks or copies into the store. Bytes per second.
double PlainFileRead(const std::string& root, int64_t n, int threads) {
  std::vector<std::string> paths;
  for (int64_t i = 0; i < n; ++i) paths.push_back(kvstore::ObjectPath(root, "beef", BenchKey(i)));
  for (const std::string& p : paths) DropCache(p);
  DropAllCachesIfRoot();
  std::atomic<int64_t> total{0};
  const double t0 = Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::string buf(1 << 20, '\0');
      for (size_t i = t; i < paths.size(); i += threads) {
        int fd = ::open(paths[i].c_str(), O_RDONLY);
        for (ssize_t r; (r = ::read(fd, buf.data(), buf.size())) > 0;) total += r;
        ::close(fd);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return static_cast<double>(total.load()) / (Now() - t0);
}

bool g_direct_io = false;  // --direct-io

// The direct path's ceiling: the object files read with FileSystem::ReadWholeFilesDirect in
// batches of `batch` split over `threads` threads, cold, nothing checked or kept. Bytes per
// second, 0 where io_uring is unavailable.
double DirectBatchRead(const std::string& root, int64_t n, int batch, int threads) {
  std::vector<std::string> paths;
  for (int64_t i = 0; i < n; ++i) paths.push_back(kvstore::ObjectPath(root, "beef", BenchKey(i)));
  SyncAndDropTree(root);
  std::atomic<int64_t> total{0};
  std::atomic<bool> unavailable{false};
  kvstore::ReadBufferPool buffers(static_cast<size_t>(threads) * (size_t{16} << 20));
  const double t0 = Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const int64_t share = std::max<int64_t>(1, batch / threads);
      for (int64_t first = t * share; first < n; first += share * threads) {
        std::span<const std::string> part(paths.data() + first, static_cast<size_t>(std::min(share, n - first)));
        const bool ran = kvstore::FileSystem::Posix()->ReadWholeFilesDirect(
            part, buffers, [&](size_t, base::Result<base::SharedBytes> bytes) {
              if (bytes.ok()) total += static_cast<int64_t>((*bytes)->size());
            });
        if (!ran) unavailable = true;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return unavailable ? 0 : static_cast<double>(total.load()) / (Now() - t0);
}

// The direct sequential read while another thread copies 64 MiB buffers in a loop: how much
// the disk's rate depends on the machine's memory traffic (on a virtual disk the host's copy
// into guest memory competes with the guest's own).
double SeqReadDirectUnderMemoryTraffic(const std::string& seq) {
  std::atomic<bool> stop{false};
  std::thread copier([&] {
    std::vector<char> a(64 << 20, 1), b(64 << 20, 2);
    while (!stop.load()) std::memcpy(a.data(), b.data(), a.size());
  });
  const double bw = SeqReadDirectBandwidth(seq);
  stop = true;
  copier.join();
  return bw;
}

std::unique_ptr<kvstore::KvStore> OpenStore(const std::string& dir, int64_t disk_bytes, int64_t memory_bytes,
                                            int io_threads, const base::Clock& clock) {
  kvstore::StoreConfig c;
  c.fingerprint = "beef";
  c.memory_bytes = memory_bytes;
  c.disk_dir = dir;
  c.disk_bytes = disk_bytes;
  c.io_threads = io_threads;
  c.direct_io = g_direct_io;
  c.background_gc = false;
  c.max_pending_write_bytes = int64_t{4} << 30;
  auto store = kvstore::KvStore::Open(c, clock);
  if (!store.ok()) {
    std::printf("open: %s\n", store.error().ToString().c_str());
    std::exit(1);
  }
  return std::move(store).value();
}

int g_streams = 1;  // --streams: prefixes restored at once

// Fetches every object in batches, g_streams Fetches at a time (stream s takes batches s,
// s + g_streams, ...: prefixes of concurrent requests); returns bytes per second.
double Restore(kvstore::KvStore& store, int64_t n, int batch, int64_t object_bytes, int64_t* found) {
  const double t0 = Now();
  std::atomic<int64_t> present{0};
  std::vector<std::thread> streams;
  for (int stream = 0; stream < g_streams; ++stream) {
    streams.emplace_back([&, stream] {
      for (int64_t first = int64_t{stream} * batch; first < n; first += int64_t{g_streams} * batch) {
        std::vector<kvstore::ObjectKey> keys;
        for (int64_t i = first; i < std::min(n, first + batch); ++i) keys.push_back(BenchKey(i));
        std::promise<std::vector<bool>> done;
        store.Fetch(keys, [&](std::vector<bool> got) { done.set_value(std::move(got)); });
        for (bool p : done.get_future().get()) present += p ? 1 : 0;
      }
    });
  }
  for (std::thread& t : streams) t.join();
  *found = present.load();
  return static_cast<double>(n * object_bytes) / (Now() - t0);
}

// A cold restore Fetch by Fetch, each preceded by a direct sequential read of as many bytes of
// the plain file (continuing where the last stopped), so that both rates come from the same
// moments of the disk (a virtual disk's rate can move severalfold within minutes:
// docs/benchmarks.md, "KV store"). Single stream.
struct PairedRates {
  double restore = 0;     // bytes of the objects found per second of Fetch
  double sequential = 0;  // bytes per second; 0 where the file system refuses O_DIRECT
  int64_t found = 0;      // objects the Fetches returned
  DeviceReads fetch_reads;  // the device's reads during the Fetches only (`at`: their seconds)
};
PairedRates PairedRestore(kvstore::KvStore& store, const std::string& store_dir, const std::string& seq_path,
                          int64_t n, int batch, int64_t object_bytes) {
  // Only the plain file's pages: dropping every cache here would also drop the inodes the
  // store's index scan just read, and each Fetch would read them back between its data reads.
  DropCache(seq_path);
  DirectSeqReader reader(seq_path);
  double restore_secs = 0, seq_secs = 0;
  int64_t seq_bytes = 0, found = 0;
  DeviceReads fetch_reads;
  for (int64_t first = 0; first < n; first += batch) {
    std::vector<kvstore::ObjectKey> keys;
    for (int64_t i = first; i < std::min(n, first + batch); ++i) keys.push_back(BenchKey(i));
    if (reader.ok()) {
      const double t0 = Now();
      seq_bytes += reader.ReadUntil((first + static_cast<int64_t>(keys.size())) * object_bytes);
      seq_secs += Now() - t0;
    }
    std::promise<std::vector<bool>> done;
    const DeviceReads before = ReadDeviceStats(store_dir);
    const double t0 = Now();
    store.Fetch(keys, [&](std::vector<bool> got) { done.set_value(std::move(got)); });
    const std::vector<bool> got = done.get_future().get();
    restore_secs += Now() - t0;
    fetch_reads.AddInterval(before, ReadDeviceStats(store_dir));
    found += std::count(got.begin(), got.end(), true);
  }
  return {static_cast<double>(found * object_bytes) / restore_secs,
          seq_secs > 0 ? static_cast<double>(seq_bytes) / seq_secs : 0, found, fetch_reads};
}

void WriteStore(const Flags& f, const std::string& root, const base::Clock& clock) {
  const int64_t total = f.objects * f.object_bytes;
  auto store = OpenStore(root, total * 2, int64_t{256} << 20, f.io_threads, clock);
  std::string base(static_cast<size_t>(f.object_bytes), '\0');
  std::mt19937_64 rng(1);
  for (size_t i = 0; i + 8 <= base.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(base.data() + i, &v, 8);
  }
  const double t0 = Now();
  for (int64_t i = 0; i < f.objects; ++i) {
    std::string payload = base;
    std::memcpy(payload.data(), &i, sizeof i);
    store->Put(BenchKey(i), base::MakeSharedBytes(std::move(payload)), 128, "chat");
  }
  store->Close();
  std::printf("write-through (Put + Close, no fsync): %.2f GB/s\n", static_cast<double>(total) / (Now() - t0) / 1e9);
}

// Rounds of (cold sequential read of a plain file, cold restore of every object), so both see
// the same disk conditions; then a warm restore.
void BenchRestore(const Flags& f, const std::string& dir) {
  const int64_t total = f.objects * f.object_bytes;
  base::SystemClock clock;
  const std::string root = dir + "/l2";
  std::printf("\n== restore from L2 (%lld objects x %lld B = %.2f GB, %d I/O threads, %d objects per Fetch, "
              "%s reads)\n",
              static_cast<long long>(f.objects), static_cast<long long>(f.object_bytes),
              static_cast<double>(total) / 1e9, f.io_threads, f.batch,
              f.direct_io ? "direct I/O batch" : "buffered");
  const std::string seq = WriteSeqFile(dir, total);
  WriteStore(f, root, clock);
  SyncAndDropTree(root);
  std::vector<double> ratios, plain_ratios, paired_ratios;
  for (int round = 0; round < f.rounds; ++round) {
    // The disk's sequential read: the faster of a buffered and a direct single-stream read.
    const double seq_buffered = SeqReadBandwidth(seq);
    const double seq_direct = SeqReadDirectBandwidth(seq);
    const double disk_bw = std::max(seq_buffered, seq_direct);
    SyncAndDropTree(root);
    auto store = OpenStore(root, total * 2, int64_t{256} << 20, f.io_threads, clock);
    const kvstore::TierStats indexed = store->Stats().tiers[1];
    // The objects' inodes and directories out of the caches too (as root), as in a store whose
    // objects have not been touched for long: each Fetch then reads them back.
    if (f.cold_metadata) DropAllCachesIfRoot();
    const double prior = store->PredictFetchSeconds(kvstore::Tier::kDisk, f.batch * f.object_bytes);
    int64_t found = 0;
    const DeviceReads before = ReadDeviceStats(root);
    const double cold = Restore(*store, f.objects, f.batch, f.object_bytes, &found);
    const std::string requests = DescribeRequests(before, ReadDeviceStats(root));
    const double predicted = store->PredictFetchSeconds(kvstore::Tier::kDisk, f.batch * f.object_bytes);
    store->Close();
    const double plain = PlainFileRead(root, f.objects, f.io_threads);
    const double direct_batches = DirectBatchRead(root, f.objects, f.batch, f.io_threads);
    const double seq_direct_busy = SeqReadDirectUnderMemoryTraffic(seq);
    SyncAndDropTree(root);
    PairedRates paired;
    std::string paired_requests;
    {
      auto cold_store = OpenStore(root, total * 2, int64_t{256} << 20, f.io_threads, clock);
      paired = PairedRestore(*cold_store, root, seq, f.objects, f.batch, f.object_bytes);
      paired_requests = DescribeRequests(DeviceReads{}, paired.fetch_reads);
      cold_store->Close();
    }
    const std::string paired_ratio =
        paired.sequential > 0 ? fmt::format("{:.0f}%", 100 * paired.restore / paired.sequential) : "n/a (no O_DIRECT)";
    if (paired.sequential > 0) paired_ratios.push_back(paired.restore / paired.sequential);
    ratios.push_back(cold / disk_bw);
    plain_ratios.push_back(cold / plain);
    std::printf("round %d%s: sequential read (1 stream, cold, 4 MiB reads) buffered %.2f GB/s, direct %.2f GB/s; "
                "restore (cold) %.2f GB/s = %.0f%% of the faster (%s); "
                "plain read() of the object files %.2f GB/s (restore = %.0f%% of that); direct batches of them, "
                "unchecked: %.2f GB/s; direct sequential read with a core copying memory: %.2f GB/s; %lld/%lld found; "
                "index at open %.0f objects/s; Fetch of %d objects: predicted %.4f s (prior %.4f), observed %.4f s; "
                "paired (a direct sequential read of as many bytes before each Fetch): restore %.2f GB/s, "
                "sequential %.2f GB/s = %s (%lld/%lld found; during the Fetches: %s)\n",
                round + 1, f.cold_metadata ? " (the whole pass with the objects' inodes evicted first)" : "",
                seq_buffered / 1e9, seq_direct / 1e9, cold / 1e9, 100 * cold / disk_bw, requests.c_str(),
                plain / 1e9, 100 * cold / plain, direct_batches / 1e9, seq_direct_busy / 1e9,
                static_cast<long long>(found), static_cast<long long>(f.objects),
                static_cast<double>(indexed.indexed_objects) / indexed.index_seconds, f.batch, predicted, prior,
                static_cast<double>(f.batch * f.object_bytes) / cold, paired.restore / 1e9, paired.sequential / 1e9,
                paired_ratio.c_str(), static_cast<long long>(paired.found), static_cast<long long>(f.objects),
                paired_requests.c_str());
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(plain_ratios.begin(), plain_ratios.end());
  std::printf("median restore / sequential read: %.0f%%; median restore / plain file reads: %.0f%%\n",
              100 * ratios[ratios.size() / 2], 100 * plain_ratios[plain_ratios.size() / 2]);
  if (!paired_ratios.empty()) {
    std::sort(paired_ratios.begin(), paired_ratios.end());
    std::printf("median paired restore / sequential read: %.0f%% (rounds: %.0f%% .. %.0f%%)\n",
                100 * paired_ratios[paired_ratios.size() / 2], 100 * paired_ratios.front(), 100 * paired_ratios.back());
  }
  auto store = OpenStore(root, total * 2, int64_t{256} << 20, f.io_threads, clock);
  int64_t found = 0;
  Restore(*store, f.objects, f.batch, f.object_bytes, &found);  // warm the page cache
  const double warm = Restore(*store, f.objects, f.batch, f.object_bytes, &found);
  std::printf("restore, warm page cache: %.2f GB/s\n", warm / 1e9);
  store->Close();
  if (getenv("KEEP")) return;
  fs::remove_all(root);
  fs::remove(seq);
}

void BenchIndex(const Flags& f, const std::string& dir) {
  base::SystemClock clock;
  const std::string root = dir + "/index";
  {
    auto store = OpenStore(root, int64_t{1} << 40, int64_t{64} << 20, f.io_threads, clock);
    auto payload = base::MakeSharedBytes(std::string(512, 'x'));
    const double t0 = Now();
    for (int64_t i = 0; i < f.index_objects; ++i) store->Put(BenchKey(i), payload, 128, "agent");
    store->Close();
    std::printf("\n== index rebuild (%lld objects of 512 B)\nwrite: %.0f objects/s\n",
                static_cast<long long>(f.index_objects), static_cast<double>(f.index_objects) / (Now() - t0));
  }
  for (int threads : {1, f.io_threads}) {
    auto store = OpenStore(root, int64_t{1} << 40, int64_t{64} << 20, threads, clock);
    const kvstore::TierStats s = store->Stats().tiers[1];
    std::printf("open with %d thread(s): %lld objects in %.3f s = %.0f objects/s (warm metadata)\n", threads,
                static_cast<long long>(s.indexed_objects), s.index_seconds,
                static_cast<double>(s.indexed_objects) / s.index_seconds);
  }
  fs::remove_all(root);
}

}  // namespace

constexpr char kUsage[] =
    "usage: kvstore_bench [--dir DIR] [--objects N] [--object-bytes B] [--index-objects N] [--io-threads T]\n"
    "                     [--batch K] [--rounds R] [--skip-model] [--direct-io] [--streams S] [--cold-metadata]\n"
    "                     [--help]\n"
    "Bytes per token of V4-Flash-shaped state, restore from L2 against the disk's sequential read\n"
    "(whole passes, and paired Fetch by Fetch), index rebuild rate. --cold-metadata: the whole passes\n"
    "start with the objects' inodes evicted too (as root). Writes about 2 x objects x\n"
    "object-bytes under DIR (default: a new directory under /tmp) and removes what it wrote.\n";

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows when redirected to a file
  Flags f;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
      if (a == "--dir") f.dir = next();
      else if (a == "--objects") f.objects = std::stoll(next());
      else if (a == "--object-bytes") f.object_bytes = std::stoll(next());
      else if (a == "--index-objects") f.index_objects = std::stoll(next());
      else if (a == "--io-threads") f.io_threads = std::stoi(next());
      else if (a == "--batch") f.batch = std::max(1, std::stoi(next()));
      else if (a == "--rounds") f.rounds = std::max(1, std::stoi(next()));
      else if (a == "--skip-model") f.skip_model = true;
      else if (a == "--direct-io") f.direct_io = g_direct_io = true;
      else if (a == "--streams") g_streams = std::max(1, std::stoi(next()));
      else if (a == "--cold-metadata") f.cold_metadata = true;
      else {
        const bool help = a == "--help" || a == "-h";
        if (!help) std::fprintf(stderr, "unknown flag %s\n", a.c_str());
        std::fprintf(help ? stdout : stderr, "%s", kUsage);
        return help ? 0 : 2;
      }
    }
  } catch (const std::exception&) {  // std::stoi / std::stoll: a missing or non-numeric value
    std::fprintf(stderr, "bad flag value\n%s", kUsage);
    return 2;
  }
  if (f.objects < 1 || f.object_bytes < 0 || f.index_objects < 1 || f.io_threads < 1) {
    std::fprintf(stderr, "%s%s",
                 "--objects, --index-objects and --io-threads must be positive, --object-bytes not negative\n", kUsage);
    return 2;
  }
  if (f.cold_metadata && ::geteuid() != 0)
    std::fprintf(stderr, "--cold-metadata needs root (/proc/sys/vm/drop_caches): the objects' inodes stay cached\n");
  std::string dir = f.dir;
  if (dir.empty()) {
    std::string pattern = "/tmp/fs_kvstore_bench_XXXXXX";
    dir = ::mkdtemp(pattern.data());
  }
  fs::create_directories(dir);
  const int64_t block = f.skip_model ? 0 : MeasureBytesPerToken(dir);
  if (f.object_bytes == 0) f.object_bytes = block > 0 ? block : 540000;
  BenchRestore(f, dir);
  BenchIndex(f, dir);
  if (f.dir.empty()) fs::remove_all(dir);
  return 0;
}
