// Measured machine ceilings for the CPU kernels (memory bandwidth and f32 FMA peak), used by
// benchmarks and `flashserve bench-forward` to print each configuration's floor. Call from the
// thread that owns the pool; each probe takes a fraction of a second and allocates its buffer.

// Method. Bandwidth: the buffer is written once in parallel (pages touched), then read in
// 64 MiB windows (twice a 32 MiB L3, and never the window read just before), each split in
// 1 MiB chunks that the pool's threads sum with vector loads of the ISA MatMul uses; GB/s =
// window bytes / wall time, best window of `passes` sweeps (the best window is the one least
// disturbed by other processes). This is DRAM read bandwidth, the floor for decode (n = 1..4),
// which reads each weight byte once. FMA peak: 16 tasks per thread, each a loop of register-
// only FMAs on 12 independent accumulators (enough to cover FMA latency times throughput on
// current x86 cores); GFLOP/s = 2 * lanes * FMAs / wall time, best of `passes` (each longer than a
// scheduler slice).
// Each task is also timed by its thread's CPU clock: where the wall-clock rate falls well below
// the rate per CPU-second times the threads (other work held the cores, or there are more
// threads than CPUs, or a CPU quota), MeasureFmaPeak warns that floors computed from it are low.
// Callers that time for long (bench-forward) probe before and after and keep the better.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"

namespace flashserve::kernels {

// Read bandwidth in GB/s (1e9 bytes per second) over a buffer of `bytes`, all pool threads:
// the best window of MemoryBandwidthWindows.
double MeasureMemoryBandwidth(base::ThreadPool& pool, int64_t bytes = int64_t{512} << 20, int passes = 2);

// The GB/s of every window of the probe above, in the order read (`passes` sweeps of bytes / 64 MiB
// windows). bench/bandwidth_bench prints their spread over a longer time: on a shared host the
// best window can be well above what the machine sustains.
std::vector<double> MemoryBandwidthWindows(base::ThreadPool& pool, int64_t bytes, int passes);

// The same probe over memory the caller already holds (e.g. a model's weights: no buffer of its
// own, so a benchmark's peak memory stays the model's, and the pages read are the ones the
// weights live in). Reads 64-bit words; `data` must span at least two 64 MiB windows. The best
// window, GB/s.
double MeasureReadBandwidth(base::ThreadPool& pool, std::span<const uint8_t> data, int passes = 2);

// f32 FMA throughput in GFLOP/s (an FMA counts 2 flops per lane), all pool threads, with the
// vector ISA of BestIsa() (the generic build: separate multiply and add).
double MeasureFmaPeak(base::ThreadPool& pool, int passes = 20);

// The probe behind MeasureFmaPeak: GFLOP/s by the wall clock, and per CPU-second of the
// threads that ran the tasks times the pool's threads (0 where the thread clock is unavailable),
// each the best of `passes`.
struct FmaProbe {
  double wall_gflops = 0, cpu_gflops = 0;
};
FmaProbe ProbeFma(base::ThreadPool& pool, int passes);

// BF16 products per second on AMX tiles (TDPBF16PS: 16 x 16 outputs of 32 products each,
// counted 2 flops per product), all pool threads, best of `passes`; 0 unless AmxOn(). The
// matrix products AMX takes (FP4/FP8 with exact BF16 activations) run against this ceiling,
// not the FMA peak.
double MeasureAmxPeak(base::ThreadPool& pool, int passes = 10);

namespace internal {
constexpr double kTileDotFlops = 2.0 * 16 * 16 * 32;  // one TDPBF16PS
// `iterations` rounds of four independent TDPBF16PS on the calling thread; returns the flops
// done. roofline_amx.cc, only where AmxSupported().
double TileDotLoop(int64_t iterations);
}  // namespace internal

}  // namespace flashserve::kernels
