// Bandwidth and FMA-peak probes (kernels/roofline.h).
#include "kernels/roofline.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "base/check.h"
#include "base/log.h"
#include "kernels/gemm/matmul.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/vec_ops.h"

namespace flashserve::kernels {
namespace {

constexpr int64_t kChunkFloats = int64_t{1} << 18;  // 1 MiB per bandwidth task
constexpr int64_t kWindowChunks = 64;                 // timed unit: 64 MiB, twice the L3
// Per FMA task: enough work that a pass (16 tasks per thread) is longer than a scheduler slice
// on current x86 cores, so that other work on a core interrupts every pass (roofline_test; a
// shorter pass could run untouched between slices).
constexpr int64_t kFmaIterations = int64_t{1} << 18;
constexpr int kFmaAccumulators = 12;  // simd::VecOps::fma_loop

// Below this share of the rate per CPU-second, the wall-clock FMA rate means the probe's threads
// did not all run at once (a quiet machine gives 0.97-1.0).
constexpr double kSharedCoresRatio = 0.85;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// CPU time of the calling thread, or 0 where the clock is unavailable.
double ThreadCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

std::vector<double> MemoryBandwidthWindows(base::ThreadPool& pool, int64_t bytes, int passes) {
  FS_CHECK(bytes >= kWindowChunks * kChunkFloats * 4 && passes >= 1, "bandwidth probe: %ld bytes, %d passes",
           static_cast<long>(bytes), passes);
  const simd::VecOps& ops = simd::GetVecOps(BestIsa());
  const int64_t num_chunks = bytes / (kChunkFloats * 4) / kWindowChunks * kWindowChunks;
  std::unique_ptr<float[]> buffer(new float[num_chunks * kChunkFloats]);
  float* data = buffer.get();
  pool.ParallelFor(num_chunks, 1, [&](int64_t c0, int64_t c1) {
    std::fill(data + c0 * kChunkFloats, data + c1 * kChunkFloats, 1.0f);
  });
  std::vector<float> sums(static_cast<size_t>(num_chunks));
  const int64_t num_windows = num_chunks / kWindowChunks;
  std::vector<double> rates;
  rates.reserve(static_cast<size_t>(passes * num_windows));
  for (int64_t window = 0; window < passes * num_windows; ++window) {
    const int64_t first = (window % num_windows) * kWindowChunks;
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(kWindowChunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = first + c0; c < first + c1; ++c) sums[c] = ops.sum(data + c * kChunkFloats, kChunkFloats);
    });
    const double seconds = Seconds(start);
    FS_CHECK(sums[first] == static_cast<float>(kChunkFloats), "bandwidth probe read wrong data");
    rates.push_back(static_cast<double>(kWindowChunks * kChunkFloats * 4) / seconds * 1e-9);
  }
  return rates;
}

double MeasureMemoryBandwidth(base::ThreadPool& pool, int64_t bytes, int passes) {
  const std::vector<double> rates = MemoryBandwidthWindows(pool, bytes, passes);
  return *std::max_element(rates.begin(), rates.end());
}

double MeasureReadBandwidth(base::ThreadPool& pool, std::span<const uint8_t> data, int passes) {
  constexpr int64_t kChunkBytes = kChunkFloats * 4, kWindowBytes = kWindowChunks * kChunkBytes;
  const int64_t num_windows = static_cast<int64_t>(data.size()) / kWindowBytes;
  FS_CHECK(num_windows >= 2 && passes >= 1, "read probe: %zu bytes, %d passes", data.size(), passes);
  std::vector<uint64_t> sinks(static_cast<size_t>(kWindowChunks));
  double best = 0.0;
  for (int64_t window = 0; window < passes * num_windows; ++window) {
    const uint8_t* first = data.data() + (window % num_windows) * kWindowBytes;
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(kWindowChunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        uint64_t acc[8] = {};
        const uint8_t* p = first + c * kChunkBytes;
        for (int64_t i = 0; i < kChunkBytes; i += 64)
          for (int k = 0; k < 8; ++k) {
            uint64_t w;
            std::memcpy(&w, p + i + 8 * k, 8);
            acc[k] ^= w;
          }
        sinks[static_cast<size_t>(c)] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
      }
    });
    best = std::max(best, static_cast<double>(kWindowBytes) / Seconds(start) * 1e-9);
  }
  volatile uint64_t sink = 0;
  for (uint64_t v : sinks) sink = sink ^ v;
  return best;
}

FmaProbe ProbeFma(base::ThreadPool& pool, int passes) {
  FS_CHECK(passes >= 1, "FMA probe: %d passes", passes);
  const simd::VecOps& ops = simd::GetVecOps(BestIsa());
  const int threads = pool.num_threads();
  const int64_t num_tasks = 16 * threads;
  std::vector<float> results(static_cast<size_t>(num_tasks));
  std::vector<double> cpu_seconds(static_cast<size_t>(num_tasks));
  const double pass_flops = static_cast<double>(num_tasks) * kFmaIterations * kFmaAccumulators * ops.lanes * 2;
  FmaProbe best;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(num_tasks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const double cpu_start = ThreadCpuSeconds();
        results[t] = ops.fma_loop(kFmaIterations);
        cpu_seconds[t] = ThreadCpuSeconds() - cpu_start;
      }
    });
    const double seconds = Seconds(start);
    double cpu = 0.0;
    for (double c : cpu_seconds) cpu += c;
    best.wall_gflops = std::max(best.wall_gflops, pass_flops / seconds * 1e-9);
    if (cpu > 0.0) best.cpu_gflops = std::max(best.cpu_gflops, pass_flops / cpu * threads * 1e-9);
  }
  return best;
}

double MeasureFmaPeak(base::ThreadPool& pool, int passes) {
  const FmaProbe probe = ProbeFma(pool, passes);
  if (probe.wall_gflops < kSharedCoresRatio * probe.cpu_gflops)
    FS_LOG(kWarning, "FMA probe: its threads did not run at once ({:.1f} GFLOP/s by the clock against {:.1f} per "
           "CPU-second): other work on the cores, more threads than CPUs or a CPU quota; floors computed from it "
           "are low", probe.wall_gflops, probe.cpu_gflops);
  return probe.wall_gflops;
}

double MeasureAmxPeak(base::ThreadPool& pool, int passes) {
  if (!AmxOn()) return 0.0;
  constexpr int64_t kTileIterations = 4096;  // a fraction of a millisecond per task at the tile unit's rate
  const int64_t num_tasks = 16 * pool.num_threads();
  std::vector<double> flops(static_cast<size_t>(num_tasks));
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelFor(num_tasks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) flops[t] = internal::TileDotLoop(kTileIterations);
    });
    const double seconds = Seconds(start);
    double total = 0.0;
    for (double f : flops) total += f;
    best = std::max(best, total / seconds * 1e-9);
  }
  return best;
}

}  // namespace flashserve::kernels
