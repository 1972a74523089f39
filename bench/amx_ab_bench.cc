// A/B timing of the AMX matrix products against the AVX-512 paths in one process: each call
// alternates between the two on the same weights and activations, and the fastest of many
// counts. A VM that switches between a fast and a slow mode between runs (docs/benchmarks.md,
// "AMX tiles") then still compares the two within one mode. One thread; weights of the medium
// engine's shapes in L2 (FP4 768 x 1024, the FP8 shape given) with activations that are exact
// BF16 (AMX takes them). Exits 0 without measuring where the CPU or the kernel lacks AMX.
// usage: amx_ab_bench [--ns 1,2,8] [--reps 400] [--fp8-rows 8192]
#include <algorithm>
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> ns = {1, 2, 4, 8, 16, 48};
  int reps = 400;
  int64_t fp8_rows = 8192;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--ns") == 0) ns = ParseList(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--fp8-rows") == 0) fp8_rows = std::max<int64_t>(16, std::atoll(argv[i + 1]));
  }
  if (!kernels::AmxSupported()) {
    std::printf("no AMX tiles here: nothing to compare\n");
    return 0;
  }
  std::mt19937 rng(1);
  ThreadPool pool(1);
  struct Config {
    MatrixFormat format;
    int64_t rows, cols;
    int tile;
  };
  std::printf("one thread, fastest of %d alternating calls each, us per call\n", reps);
  for (Config c : {Config{MatrixFormat::kFp4, 768, 1024, 32}, Config{MatrixFormat::kFp8, fp8_rows, 512, 128}}) {
    kernels::TestMatrix tm = kernels::MakeTestMatrix(c.format, c.rows, c.cols, c.tile, rng);
    flashserve::model::Matrix w = tm.matrix;
    std::vector<uint8_t> packed;
    if (c.format == MatrixFormat::kFp4) {  // as the engine repacks its experts
      packed.resize(static_cast<size_t>(w.StoredBytes()));
      w = tm.matrix.RepackFp4LanePairs(packed.data());
    }
    w.SetScaleRange();
    for (int64_t n : ns) {
      std::vector<float> x = kernels::RandomVector(n * c.cols, rng), y(static_cast<size_t>(n * c.rows));
      for (float& v : x) v = std::bit_cast<float>(std::bit_cast<uint32_t>(v) & 0xFFFF0000u);
      double best[2] = {1e30, 1e30};
      for (int rep = 0; rep < reps; ++rep)
        for (int amx = 0; amx < 2; ++amx) {
          const auto t0 = std::chrono::steady_clock::now();
          if (amx == 1) {
            kernels::internal::MatMulAmx(w, x.data(), n, c.cols, y.data(), c.rows, pool);
          } else {
            kernels::internal::MatMulWithIsa(kernels::Isa::kAvx512, w, x.data(), n, c.cols, y.data(), c.rows, pool);
          }
          best[amx] = std::min(best[amx], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
      std::printf("%-22s n=%-3ld AMX %8.1f   AVX-512 %8.1f\n", w.Describe().c_str(), static_cast<long>(n), best[1] * 1e6,
                  best[0] * 1e6);
    }
  }
  return 0;
}
