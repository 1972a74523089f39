// A/B timing of the AMX matrix products against the AVX-512 paths in one process: each call
// alternates between the two on the same weights and activations, and the fastest of many
// counts. A VM that switches between a fast and a slow mode between runs (docs/benchmarks.md,
// "CPU kernels", Emerald Rapids) then still compares the two within one mode. --threads threads
// (1); weights of the medium engine's shapes in L2 (FP4 768 x 1024, the FP8 shape given) with
// activations that are exact BF16 (AMX takes them). Exits 0 without measuring where the CPU or
// the kernel lacks AMX.
// --cold MB: the engine's batch-1 case instead: copies of each matrix (the medium engine's
// FP4 expert, FP8 query and BF16 head shapes) filling MB megabytes, more than the last-level
// cache, multiplied one after another on --threads threads, so that every call streams its
// weights from DRAM; prints GB/s of weights read per path.
// --inexact: activations that are not exact BF16 values (as wo_a's input), so that FP8 takes the
// split tiles (three passes) and FP4 the AVX-512 path on both sides; --fp8-cols sets the FP8
// shape's columns (wo_a's group slice: --fp8-rows 256 --fp8-cols 2048).
// usage: amx_ab_bench [--ns 1,2,8] [--reps 400] [--fp8-rows 8192] [--fp8-cols 512] [--inexact]
//                     [--cold MB] [--threads N]
#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm/matmul.h"
#include "kernels/gemm/matmul_internal.h"
#include "kernels/simd/isa.h"
#include "kernels/test_matrices.h"

namespace {

using flashserve::base::ThreadPool;
using flashserve::model::MatrixFormat;
namespace kernels = flashserve::kernels;

std::vector<int64_t> ParseList(const char* s) {
  std::vector<int64_t> out;
  for (const char* p = s; *p != '\0';) {
    out.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return out;
}

// A test matrix as the engine holds it (FP4 experts repacked into lane pairs, scale range set).
struct BenchMatrix {
  kernels::TestMatrix tm;
  std::vector<uint8_t> packed;
  flashserve::model::Matrix w;
  BenchMatrix(MatrixFormat format, int64_t rows, int64_t cols, int tile, std::mt19937& rng)
      : tm(kernels::MakeTestMatrix(format, rows, cols, tile, rng)), w(tm.matrix) {
    if (format == MatrixFormat::kFp4) {
      packed.resize(static_cast<size_t>(w.StoredBytes()));
      w = tm.matrix.RepackFp4LanePairs(packed.data());
    }
    w.SetScaleRange();
  }
};

// Fastest seconds of `reps` runs of products of every matrix in `ws` with n random activation
// rows (exact BF16 values unless `inexact`), per path ([0] AVX-512, [1] AMX), the paths
// alternating.
std::array<double, 2> FastestAB(const std::vector<flashserve::model::Matrix>& ws, int64_t n, int reps,
                                bool inexact, ThreadPool& pool, std::mt19937& rng) {
  const flashserve::model::Matrix& w0 = ws.front();
  std::vector<float> x = kernels::RandomVector(n * w0.cols, rng), y(static_cast<size_t>(n * w0.rows));
  if (!inexact)
    for (float& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
  std::array<double, 2> best = {1e30, 1e30};
  for (int rep = 0; rep < reps; ++rep)
    for (int amx = 0; amx < 2; ++amx) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& w : ws) {
        if (amx == 1) {
          kernels::internal::MatMulAmx(w, x.data(), n, w.cols, y.data(), w.rows, pool);
        } else {
          kernels::internal::MatMulWithIsa(kernels::Isa::kAvx512, w, x.data(), n, w.cols, y.data(), w.rows, pool);
        }
      }
      best[amx] = std::min(best[amx], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  return best;
}

// Copies of w's bytes (data and scales) back to back filling about budget_bytes (two at least),
// as matrices over them: weights a sweep streams from DRAM. `store` keeps the bytes.
std::vector<flashserve::model::Matrix> ColdCopies(const flashserve::model::Matrix& w, int64_t budget_bytes,
                                                  std::vector<uint8_t>& store) {
  const int64_t data_bytes = w.rows * w.RowBytes(), scale_bytes = w.NumScales();
  const int64_t copy_bytes = (data_bytes + scale_bytes + 4095) / 4096 * 4096;
  const int64_t copies = std::max<int64_t>(2, budget_bytes / copy_bytes);
  store.assign(static_cast<size_t>(copies * copy_bytes) + 64, 0);
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(store.data()) + 63) & ~uintptr_t{63});
  std::vector<flashserve::model::Matrix> views(static_cast<size_t>(copies), w);
  for (int64_t c = 0; c < copies; ++c) {
    uint8_t* at = base + c * copy_bytes;
    std::memcpy(at, w.data, static_cast<size_t>(data_bytes));
    if (scale_bytes > 0) std::memcpy(at + data_bytes, w.scale, static_cast<size_t>(scale_bytes));
    views[c].data = at;
    views[c].scale = scale_bytes > 0 ? at + data_bytes : nullptr;
  }
  return views;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> ns = {1, 2, 4, 8, 16, 48};
  int reps = 400;
  int64_t fp8_rows = 8192, fp8_cols = 512, cold_mb = 0;
  bool inexact = false;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {  // the one flag without a value
    if (std::strcmp(argv[i], "--inexact") == 0) {
      inexact = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ns") == 0) ns = ParseList(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--fp8-rows") == 0) fp8_rows = std::max<int64_t>(16, std::atoll(argv[i + 1]));
    if (std::strcmp(argv[i], "--fp8-cols") == 0) fp8_cols = std::max<int64_t>(128, std::atoll(argv[i + 1]) / 128 * 128);
    if (std::strcmp(argv[i], "--cold") == 0) cold_mb = std::max<int64_t>(1, std::atoll(argv[i + 1]));
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::max(1, std::atoi(argv[i + 1]));
  }
  if (!kernels::AmxSupported()) {
    std::printf("no AMX tiles here: nothing to compare\n");
    return 0;
  }
  std::mt19937 rng(1);
  ThreadPool pool(threads);
  struct Shape {
    MatrixFormat format;
    int64_t rows, cols;
    int tile;
  };
  std::vector<Shape> shapes = {{MatrixFormat::kFp4, 768, 1024, 32}, {MatrixFormat::kFp8, fp8_rows, fp8_cols, 128}};
  if (cold_mb > 0) {
    shapes.push_back({MatrixFormat::kBF16, 129280, 1024, 1});
    std::printf("%d thread(s), weights streamed from DRAM (%ld MB of copies), fastest of %d sweeps each\n", threads,
                static_cast<long>(cold_mb), reps);
  } else {
    std::printf("%d thread(s), fastest of %d alternating calls each, us per call\n", threads, reps);
  }
  if (inexact) std::printf("activations not exact BF16: FP8 on the split tiles, FP4 on the AVX-512 path on both sides\n");
  for (const Shape& c : shapes) {
    const BenchMatrix m(c.format, c.rows, c.cols, c.tile, rng);
    std::vector<uint8_t> store;
    const std::vector<flashserve::model::Matrix> ws =
        cold_mb > 0 ? ColdCopies(m.w, cold_mb << 20, store) : std::vector<flashserve::model::Matrix>{m.w};
    for (int64_t n : ns) {
      const std::array<double, 2> best = FastestAB(ws, n, reps, inexact, pool, rng);
      if (cold_mb > 0) {
        const double bytes = static_cast<double>(ws.size()) * static_cast<double>(m.w.StoredBytes());
        std::printf("%-26s x%-4zu n=%-3ld AMX %6.1f GB/s   AVX-512 %6.1f GB/s\n", m.w.Describe().c_str(), ws.size(),
                    static_cast<long>(n), bytes / best[1] * 1e-9, bytes / best[0] * 1e-9);
      } else {
        std::printf("%-22s n=%-3ld AMX %8.1f   AVX-512 %8.1f\n", m.w.Describe().c_str(), static_cast<long>(n),
                    best[1] * 1e6, best[0] * 1e6);
      }
    }
  }
  return 0;
}
