// Micro-benchmark of kernels::MatMul on realistic DeepSeek-V4 weight shapes (FP8 dense
// linears, FP4 routed experts, BF16 output-head rows) and the medium engine's exact shapes
// (the whole 129280-row head, cold small experts and projections), next to the machine's
// measured floors (kernels/roofline.h). Measures and prints; asserts nothing.
//
// The expert shapes are also timed with every thread multiplying whole matrices side by side,
// one per task, as the engine runs routed experts (lines marked *: time per matrix).
//
// Then SinkAttention (the engine's head counts and key counts) and RmsNorm on one thread for
// every instruction set the CPU has, and the engine's decode attention with its keys streamed
// from DRAM against in cache (--only "attention cold" for that line alone).
//
// usage: matmul_bench [--threads N] [--passes P] [--only SUBSTRING-OF-A-CONFIG] [--ns 1,8,32]
//                     [--qat-x 0|1] [--bf16-dot 0|1] [--amx 0|1] [--fp4-lane-pairs 0|1] [--hot 0|1]
// --hot 1: one matrix per configuration, multiplied again and again, so its weights stay in
// cache (L2 for the medium engine's shapes up to 1 MiB, else L3 or DRAM): what the kernel
// computes per second when memory does not bound it, against the FMA peak of the same threads
// (with --threads 1: one core's). Lines with weights larger than the L2 say so.
// --qat-x 1: activations are exact BF16 values, as the QAT emulation's FP8 rounding leaves them
// (FP4 and FP8 products may then use AVX512-BF16 dot products); --bf16-dot 0 turns those off,
// 1 uses them even where the CPU runs them slowly (default: only where they pay, Bf16Dots::kAuto).
// --amx 0: no AMX tiles (default: FP4 and FP8 products with exact BF16 activations use them
// where the CPU has them; kernels::SetAmx).
// --fp4-lane-pairs: FP4 weights repacked as the engine repacks its experts (model::Fp4Layout;
// default on where the kernels are AVX-512) or left in checkpoint order. Scale ranges are
// recorded as at load.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/aligned_vector.h"
#include "base/thread_pool.h"
#include "kernels/attention/sink_attention.h"
#include "kernels/gemm/matmul.h"
#include "kernels/norm_rope/norm_rope.h"
#include "kernels/roofline.h"
#include "model/matrix.h"

namespace {

using flashserve::base::ThreadPool;
using flashserve::kernels::Isa;
using flashserve::model::Matrix;
using flashserve::model::MatrixFormat;

constexpr int64_t kSetBytes = int64_t{256} << 20;  // weights per configuration: 8x the L3
constexpr int64_t kL2Bytes = int64_t{1} << 20;     // per core on Zen 4 and Zen 5 (--hot lines above it say so)

uint64_t NextRandom(uint64_t& state) {  // splitmix64
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random codes that are never NaN: FP8 bytes with exponent < 15, BF16 with |x| in [2^-7, 2).
void FillWeights(MatrixFormat format, std::vector<uint8_t>& bytes, uint64_t seed) {
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    uint64_t r = NextRandom(seed);
    if (format == MatrixFormat::kFp8) r &= 0xF7F7F7F7F7F7F7F7ull;
    if (format == MatrixFormat::kBF16) r = (r & 0x807F807F807F807Full) | 0x3C003C003C003C00ull;
    std::memcpy(bytes.data() + i, &r, 8);
  }
}

struct WeightSet {
  std::string name;
  std::vector<std::vector<uint8_t>> data, scale;
  std::vector<Matrix> matrices;
  int64_t bytes_each = 0;
};

// FP4 sets in model::Fp4Layout::kLanePairs (--fp4-lane-pairs; default: where the engine uses it).
bool fp4_lane_pairs = flashserve::kernels::PrefersFp4LanePairs();
// --hot 1: sets of one matrix, timed in cache (HotCallSeconds).
bool hot = false;

WeightSet MakeSet(const std::string& name, MatrixFormat format, int64_t rows, int64_t cols, int tile) {
  WeightSet set;
  set.name = name;
  Matrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  int64_t data_bytes = rows * cols * (format == MatrixFormat::kBF16 ? 2 : 1);
  int64_t scale_bytes = 0;
  if (format == MatrixFormat::kFp8) {
    m.tile_rows = m.tile_cols = tile;
    m.scale_cols = (cols + tile - 1) / tile;
    scale_bytes = (rows + tile - 1) / tile * m.scale_cols;
  } else if (format == MatrixFormat::kFp4) {
    data_bytes /= 2;
    m.tile_cols = 32;
    m.scale_cols = cols / 32;
    scale_bytes = rows * m.scale_cols;
  }
  set.bytes_each = data_bytes + scale_bytes;
  const int64_t copies = hot ? 1 : (kSetBytes + set.bytes_each - 1) / set.bytes_each;
  for (int64_t c = 0; c < copies; ++c) {
    set.data.emplace_back(data_bytes);
    FillWeights(format, set.data.back(), 1000 + c);
    set.scale.emplace_back(scale_bytes);
    uint64_t seed = 7 + c;
    for (auto& s : set.scale.back()) s = static_cast<uint8_t>(118 + NextRandom(seed) % 8);
    m.data = set.data.back().data();
    m.scale = scale_bytes ? set.scale.back().data() : nullptr;
    if (format == MatrixFormat::kFp4 && fp4_lane_pairs) {  // as the engine repacks its experts
      std::vector<uint8_t> packed(static_cast<size_t>(data_bytes + scale_bytes));  // codes, then scales
      m.fp4_layout = flashserve::model::Fp4Layout::kCheckpoint;
      m = m.RepackFp4LanePairs(packed.data());
      set.data.back() = std::move(packed);
      m.data = set.data.back().data();
      m.scale = m.data + data_bytes;
    }
    m.SetScaleRange();
    m.SetExponentRange();  // BF16, as the loader does for the head
    set.matrices.push_back(m);
  }
  return set;
}

bool qat_x = false;

// n rows of cols activations in [-1, 1] (exact BF16 values with --qat-x 1), the same every call,
// on a cache line as the engine's activations are.
flashserve::base::AlignedVector<float> Activations(int64_t n, int64_t cols) {
  flashserve::base::AlignedVector<float> x(static_cast<size_t>(n * cols));
  uint64_t seed = 99;
  for (auto& v : x) {
    v = static_cast<float>(static_cast<int64_t>(NextRandom(seed) % 2001) - 1000) * 1e-3f;
    if (qat_x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
  }
  return x;
}

template <class Fn>
double BestSeconds(int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Seconds of the fastest call over `passes` sweeps of the set. The set is several times the
// L3, so every call streams its weights from DRAM; the fastest call is the one least disturbed
// by other processes on a shared machine.
double BestCallSeconds(const WeightSet& set, int64_t n, int passes, ThreadPool& pool) {
  const Matrix& first = set.matrices[0];
  const auto x = Activations(n, first.cols);
  std::vector<float> y(static_cast<size_t>(n * first.rows));
  double best = 1e30;
  for (int pass = 0; pass < passes; ++pass)
    for (const Matrix& m : set.matrices)
      best = std::min(best, BestSeconds(1, [&] {
        flashserve::kernels::MatMul(m, x.data(), n, m.cols, y.data(), m.rows, pool);
      }));
  return best;
}

// Seconds per call of the set's first matrix, in cache: after a warming call, groups of calls
// of at least 2 ms each, the fastest group's time per call, of 4 x `passes` groups.
double HotCallSeconds(const WeightSet& set, int64_t n, int passes, ThreadPool& pool) {
  const Matrix& m = set.matrices[0];
  const auto x = Activations(n, m.cols);
  std::vector<float> y(static_cast<size_t>(n * m.rows));
  const auto call = [&] { flashserve::kernels::MatMul(m, x.data(), n, m.cols, y.data(), m.rows, pool); };
  const double once = BestSeconds(2, call);
  const int per_group = static_cast<int>(std::clamp(2e-3 / std::max(once, 1e-9), 1.0, 1e5));
  const double group = BestSeconds(4 * passes, [&] {
    for (int i = 0; i < per_group; ++i) call();
  });
  return group / per_group;
}

// Seconds per matrix when every thread multiplies whole matrices of the set side by side, one
// per task (as the engine runs routed experts): the fastest of `passes` sweeps, divided by the
// set's size. Each thread streams its own matrices, so this shows how the threads share DRAM.
double ConcurrentSecondsPerMatrix(const WeightSet& set, int64_t n, int passes, ThreadPool& pool) {
  const Matrix& first = set.matrices[0];
  const auto x = Activations(n, first.cols);
  std::vector<std::vector<float>> ys(set.matrices.size(), std::vector<float>(static_cast<size_t>(n * first.rows)));
  const double sweep = BestSeconds(passes, [&] {
    pool.ParallelTasks(static_cast<int64_t>(set.matrices.size()), [&](int64_t t, int64_t) {
      const Matrix& m = set.matrices[static_cast<size_t>(t)];
      // Inside a task the product runs on this thread alone.
      flashserve::kernels::MatMul(m, x.data(), n, m.cols, ys[static_cast<size_t>(t)].data(), m.rows, pool);
    });
  });
  return sweep / static_cast<double>(set.matrices.size());
}

// One thread, per instruction set: SinkAttention for one query position (the heads of one
// engine task or a whole position, 512 wide, over 128..1000 keys) and RmsNorm over 4096 values.
void BenchAttentionAndNorm(const std::string& only) {
  const int dim = 512, max_heads = 64, max_keys = 1000;
  uint64_t seed = 5;
  auto random = [&] { return static_cast<float>(static_cast<int64_t>(NextRandom(seed) % 2001) - 1000) * 1e-3f; };
  std::vector<float> q(max_heads * dim), keys(max_keys * dim), sinks(max_heads), out(max_heads * dim);
  std::vector<float> scratch(max_keys);
  for (auto& v : q) v = random() * 0.1f;
  for (auto& v : keys) v = random();
  for (auto& v : sinks) v = random();
  std::vector<const float*> ptrs;
  for (int j = 0; j < max_keys; ++j) ptrs.push_back(keys.data() + j * dim);
  std::printf("\n%-8s %6s %6s %10s %9s\n", "isa", "heads", "keys", "us/call", "GFLOP/s");
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!flashserve::kernels::IsaSupported(isa)) continue;
    if (std::string("attention ").append(flashserve::kernels::IsaName(isa)).find(only) == std::string::npos)
      continue;
    for (int heads : {4, 16, 64}) {
      for (int num_keys : {128, 512, 1000}) {
        const double s = BestSeconds(std::max(3, 20000 / (heads * num_keys / 16)), [&] {
          flashserve::kernels::SinkAttentionWithIsa(isa, q.data(), 0, heads, dim, ptrs.data(), num_keys,
                                                    sinks.data(), 0.044f, out.data(), scratch.data());
        });
        std::printf("%-8s %6d %6d %10.1f %9.1f\n", flashserve::kernels::IsaName(isa), heads, num_keys, s * 1e6,
                    4.0 * heads * num_keys * dim / s * 1e-9);
      }
    }
  }
  if (std::string("rms norm").find(only) == std::string::npos) return;
  std::vector<float> x(4096), w(4096), y(4096);
  for (auto& v : x) v = random();
  for (auto& v : w) v = random();
  std::printf("\n%-8s %16s\n", "isa", "rms norm 4096");
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!flashserve::kernels::IsaSupported(isa)) continue;
    const double norm = BestSeconds(200, [&] {
      flashserve::kernels::RmsNormWithIsa(isa, x.data(), w.data(), 4096, 1e-6f, y.data());
    });
    std::printf("%-8s %13.2f us\n", flashserve::kernels::IsaName(isa), norm * 1e6);
  }
}

// One thread, the best instruction set: the engine's decode attention (16 heads of 512 over
// 192 keys) with its keys streamed from DRAM (600 positions' keys, 236 MB, one position after
// another as an engine thread takes them), against the same calls over one position's keys in
// cache; us per call, best of 6 sweeps.
void BenchAttentionCold() {
  const int dim = 512, heads = 16, keys_per_call = 192, calls = 600;
  uint64_t seed = 9;
  auto random = [&] { return static_cast<float>(static_cast<int64_t>(NextRandom(seed) % 2001) - 1000) * 1e-3f; };
  std::vector<float> q(heads * dim), sinks(heads), out(heads * dim), scratch(keys_per_call);
  std::vector<float> keys(static_cast<size_t>(calls) * keys_per_call * dim);
  for (auto& v : q) v = random() * 0.1f;
  for (auto& v : sinks) v = random();
  for (auto& v : keys) v = random();
  std::vector<const float*> ptrs(keys.size() / dim);
  for (size_t j = 0; j < ptrs.size(); ++j) ptrs[j] = keys.data() + j * dim;
  const Isa isa = flashserve::kernels::BestIsa();
  double best[2] = {1e30, 1e30};  // cold, in cache
  for (int sweep = 0; sweep < 6; ++sweep)
    for (int hot = 0; hot < 2; ++hot) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int c = 0; c < calls; ++c)
        flashserve::kernels::SinkAttentionWithIsa(isa, q.data(), 0, heads, dim, ptrs.data() + (hot ? 0 : c) * keys_per_call,
                                                  keys_per_call, sinks.data(), 0.044f, out.data(), scratch.data());
      best[hot] = std::min(best[hot], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  const double flops = 4.0 * heads * keys_per_call * dim;
  std::printf("\nattention, %s, one thread, %d heads x %d over %d keys: from DRAM %.1f us per call (%.1f GFLOP/s, "
              "%.1f GB/s of keys), in cache %.1f us (%.1f GFLOP/s)\n", flashserve::kernels::IsaName(isa), heads, dim,
              keys_per_call, best[0] / calls * 1e6, flops * calls / best[0] * 1e-9,
              4.0 * keys_per_call * dim * calls / best[0] * 1e-9, best[1] / calls * 1e6, flops * calls / best[1] * 1e-9);
}

std::vector<int64_t> ParseList(const char* text) {
  std::vector<int64_t> out;
  for (const char* p = text; *p != '\0';) {
    char* end = nullptr;
    out.push_back(std::strtoll(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != '\0') break;
  }
  return out;
}

struct Config {
  const char* name;
  MatrixFormat format;
  int64_t rows, cols;
  int tile;
  std::vector<int64_t> ns;
  bool concurrent = false;  // also one matrix per thread, side by side (the engine's experts)
};

// One result line: s seconds per call (per matrix where the threads run matrices side by side,
// marked " *"), against the floors of the whole machine.
void Print(const Config& c, const WeightSet& set, int64_t n, double s, double bandwidth, double peak,
           const char* mark) {
  const double gbs = static_cast<double>(set.bytes_each) / s * 1e-9;
  const double gflops = 2.0 * static_cast<double>(c.rows * c.cols * n) / s * 1e-9;
  const double floor_s = std::max(static_cast<double>(set.bytes_each) / (bandwidth * 1e9),
                                  2.0 * static_cast<double>(c.rows * c.cols * n) / (peak * 1e9));
  std::printf("%-30s %4zu %6ld %10.1f %8.1f %9.1f %5.0f%% %5.0f%% %6.0f%%%s\n", c.name, set.matrices.size(),
              static_cast<long>(n), s * 1e6, gbs, gflops, 100.0 * gbs / bandwidth, 100.0 * gflops / peak,
              100.0 * floor_s / s, mark);
}

void BenchMatMul(const Config& c, const std::vector<int64_t>& ns, int passes, double bandwidth, double peak,
                 ThreadPool& pool) {
  const WeightSet set = MakeSet(c.name, c.format, c.rows, c.cols, c.tile);
  for (int64_t n : ns) {
    if (hot) {
      Print(c, set, n, HotCallSeconds(set, n, passes, pool), bandwidth, peak,
            set.bytes_each > kL2Bytes ? " (> L2)" : "");
      continue;
    }
    const double s = BestCallSeconds(set, n, passes, pool);
    Print(c, set, n, s, bandwidth, peak, "");
    if (c.concurrent && pool.num_threads() > 1)
      Print(c, set, n, ConcurrentSecondsPerMatrix(set, n, passes, pool), bandwidth, peak, " *");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, passes = 5;
  std::string only;
  std::vector<int64_t> ns;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--passes") == 0) passes = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--only") == 0) only = argv[i + 1];
    if (std::strcmp(argv[i], "--ns") == 0) ns = ParseList(argv[i + 1]);
    if (std::strcmp(argv[i], "--qat-x") == 0) qat_x = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--bf16-dot") == 0)
      flashserve::kernels::SetBf16Dots(std::atoi(argv[i + 1]) != 0 ? flashserve::kernels::Bf16Dots::kOn
                                                                    : flashserve::kernels::Bf16Dots::kOff);
    if (std::strcmp(argv[i], "--fp4-lane-pairs") == 0) fp4_lane_pairs = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--hot") == 0) hot = std::atoi(argv[i + 1]) != 0;
    if (std::strcmp(argv[i], "--amx") == 0) flashserve::kernels::SetAmx(std::atoi(argv[i + 1]) != 0);
  }
  ThreadPool pool(threads);
  const double bandwidth = flashserve::kernels::MeasureMemoryBandwidth(pool);
  const double peak = flashserve::kernels::MeasureFmaPeak(pool);
  std::printf("isa %s, %d threads, activations %s, BF16 dot products %s, AMX %s, FP4 %s\n",
              flashserve::kernels::MatMulIsa(), pool.num_threads(), qat_x ? "exact BF16 (QAT)" : "f32",
              flashserve::kernels::Bf16PairsAvailable() ? "on" : "off", flashserve::kernels::AmxOn() ? "on" : "off",
              fp4_lane_pairs ? "in lane pairs" : "in checkpoint order");
  std::printf("floor: read bandwidth %.1f GB/s (512 MiB buffer), f32 FMA peak %.1f GFLOP/s\n", bandwidth, peak);
  if (hot) {
    std::printf("in cache: one matrix per line, the fastest of %d groups of calls (%%BW and %%floor: against DRAM)\n\n",
                4 * passes);
  } else {
    std::printf("fastest call of %d sweeps over each set (>= 256 MiB of weights, so DRAM-cold)\n\n", passes);
  }
  std::printf("%-30s %4s %6s %10s %8s %9s %6s %6s %7s\n", "weights", "set", "n", "us/call", "GB/s", "GFLOP/s",
              "%BW", "%FMA", "%floor");
  const std::vector<int64_t> wide = {1, 4, 8, 32}, head = {1, 8, 32}, small = {1, 2, 4, 8};
  const Config configs[] = {
      {"FP8 4096x4096 tiles 128", MatrixFormat::kFp8, 4096, 4096, 128, wide},
      {"FP8 4096x4096 tiles 32", MatrixFormat::kFp8, 4096, 4096, 32, wide},
      {"FP4 2048x4096 (expert)", MatrixFormat::kFp4, 2048, 4096, 32, wide},
      {"BF16 16160x1024 (head 1/8)", MatrixFormat::kBF16, 16160, 1024, 1, wide},
      // The medium engine's shapes (hidden 1024, experts of 768, vocabulary 129280).
      {"BF16 129280x1024 (head)", MatrixFormat::kBF16, 129280, 1024, 1, head},
      {"FP8 129280x1024 (head)", MatrixFormat::kFp8, 129280, 1024, 128, head},
      {"FP4 768x1024 (expert w1/w3)", MatrixFormat::kFp4, 768, 1024, 32, small, true},
      {"FP4 1024x768 (expert w2)", MatrixFormat::kFp4, 1024, 768, 32, small, true},
      {"FP8 768x1024 (shared w1/w3)", MatrixFormat::kFp8, 768, 1024, 128, small},
      {"FP8 512x1024", MatrixFormat::kFp8, 512, 1024, 128, small},
      {"FP8 1024x512", MatrixFormat::kFp8, 1024, 512, 128, small},
      {"FP8 8192x512", MatrixFormat::kFp8, 8192, 512, 128, small},
      {"FP8 512x2048", MatrixFormat::kFp8, 512, 2048, 128, small},
  };
  for (const Config& c : configs) {
    if (std::string(c.name).find(only) == std::string::npos) continue;
    BenchMatMul(c, ns.empty() ? c.ns : ns, passes, bandwidth, peak, pool);
  }
  BenchAttentionAndNorm(only);
  if (std::string("attention cold").find(only) != std::string::npos) BenchAttentionCold();
  return 0;
}
