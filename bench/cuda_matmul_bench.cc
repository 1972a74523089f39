// CUDA exact-order matrix product (kernels/cuda/cuda_matmul.h): for decode-shaped products of
// each weight format, microseconds per product, weight bytes per second against the measured
// read-stream ceiling, and FMAs per second against the measured f32 FMA ceiling. Each matrix
// is uploaded in enough copies (>= 512 MiB, several times the L2) that the timed passes, which
// cycle through the copies, read the weights from device memory. Built with
// -DFLASHSERVE_CUDA=ON. Prints; asserts nothing.
//
//   cuda_matmul_bench [--ns 1,2,4,8,16,32] [--reps 10] [--only TEXT]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/roofline_probe.h"
#include "kernels/test_matrices.h"

namespace {

using namespace flashserve;
using namespace flashserve::kernels;
using model::MatrixFormat;

struct Shape {
  const char* name;
  MatrixFormat format;
  int64_t rows, cols;
  int tile;
};

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    out.push_back(std::stoll(s.substr(pos, end - pos)));
    pos = end + 1;
  }
  return out;
}

// Seconds per product: `reps` passes over every copy, timed with events.
double SecondsPerProduct(cuda::ExactMatMul& mm, const std::vector<cuda::DeviceMatrix>& copies, const float* x,
                         int64_t n, float* y, int rows_per_thread, int reps) {
  for (const auto& w : copies) (void)mm.Run(w, x, n, w.cols(), y, w.rows(), rows_per_thread);  // warm-up
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int r = 0; r < reps; ++r)
    for (const auto& w : copies) (void)mm.Run(w, x, n, w.cols(), y, w.rows(), rows_per_thread);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (base::Status s = mm.Synchronize(); !s.ok()) {
    std::printf("error: %s\n", s.ToString().c_str());
    return 0;
  }
  return ms / 1e3 / (static_cast<double>(reps) * static_cast<double>(copies.size()));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> ns = {1, 2, 4, 8, 16, 32};
  int reps = 10;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--ns") ns = ParseList(next());
    else if (a == "--reps") reps = std::max(1, std::stoi(next()));
    else if (a == "--only") only = next();
    else {
      std::printf("unknown flag %s\nusage: cuda_matmul_bench [--ns 1,2,4,8] [--reps N] [--only TEXT]\n", a.c_str());
      return 2;
    }
  }
  auto device = cuda::DeviceDescription();
  if (!device.ok()) {
    std::printf("cuda_matmul_bench: %s\n", device.error().ToString().c_str());
    return 1;
  }
  std::string error;
  const cuda::DeviceCeilings ceil = cuda::MeasureDeviceCeilings(int64_t{2} << 30, &error);
  std::printf("device: %s\n", device->c_str());
  std::printf("ceilings: read stream %.0f GB/s, device copy %.0f GB/s (read + write), f32 FMA %.1f T/s%s%s\n",
              ceil.read_bytes_per_s / 1e9, ceil.copy_bytes_per_s / 1e9, ceil.fma_per_s / 1e12,
              error.empty() ? "" : ", error: ", error.c_str());

  const Shape shapes[] = {
      {"FP8 4096x4096 tiles 128 (attention projection)", MatrixFormat::kFp8, 4096, 4096, 128},
      {"FP8 4096x1024 tiles 32 (V4.1-style tiles)", MatrixFormat::kFp8, 4096, 1024, 32},
      {"FP4 2048x4096 (expert w1/w3)", MatrixFormat::kFp4, 2048, 4096, 32},
      {"FP4 4096x2048 (expert w2)", MatrixFormat::kFp4, 4096, 2048, 32},
      {"BF16 32768x4096 (head slice)", MatrixFormat::kBF16, 32768, 4096, 1},
  };
  std::mt19937 rng(5);
  int64_t max_n = 1;
  for (int64_t n : ns) max_n = std::max(max_n, n);
  for (const Shape& s : shapes) {
    if (!only.empty() && std::string(s.name).find(only) == std::string::npos) continue;
    TestMatrix tm = MakeTestMatrix(s.format, s.rows, s.cols, s.tile, rng);
    // FP4 scale bytes as checkpoints have them (weights of magnitude ~2^-6..2^-3): <= 128,
    // the kernels' one-multiply decoder.
    if (s.format == MatrixFormat::kFp4)
      for (auto& b : tm.scale) b = static_cast<uint8_t>(118 + b % 11);
    std::vector<cuda::DeviceMatrix> copies;
    int64_t total = 0;
    while (total < (int64_t{512} << 20) && copies.size() < 256) {
      auto w = cuda::DeviceMatrix::Upload(tm.matrix);
      if (!w.ok()) {
        std::printf("%s: %s\n", s.name, w.error().ToString().c_str());
        break;
      }
      total += w->weight_bytes();
      copies.push_back(std::move(*w));
    }
    if (copies.empty()) continue;
    const double bytes = static_cast<double>(copies[0].weight_bytes());
    std::printf("\n== %s: %.1f MB read per product, %zu copies\n", s.name, bytes / 1e6, copies.size());
    std::printf("%4s %4s %10s %10s %8s %10s %8s\n", "n", "rpt", "us", "GB/s", "%read", "TFMA/s", "%fma");
    auto x = cuda::DeviceFloats::Allocate(max_n * s.cols);
    auto y = cuda::DeviceFloats::Allocate(max_n * s.rows);
    if (!x.ok() || !y.ok()) {
      std::printf("cannot allocate activations\n");
      continue;
    }
    std::vector<float> hx = RandomVector(max_n * s.cols, rng);
    (void)x->CopyFromHost(hx.data(), max_n * s.cols);
    cuda::ExactMatMul mm;
    auto row = [&](int64_t n, int rpt) {
      const double t = SecondsPerProduct(mm, copies, x->data(), n, y->data(), rpt, reps);
      if (t <= 0) return;
      const double fma = static_cast<double>(s.rows) * static_cast<double>(s.cols) * static_cast<double>(n);
      std::printf("%4lld %4d %10.2f %10.0f %7.1f%% %10.2f %7.1f%%\n", static_cast<long long>(n),
                  rpt == 0 ? cuda::ExactMatMul::RowsPerThread(n) : rpt, t * 1e6, bytes / t / 1e9,
                  100.0 * bytes / t / ceil.read_bytes_per_s, fma / t / 1e12, 100.0 * fma / t / ceil.fma_per_s);
    };
    for (int64_t n : ns) row(n, 0);
    if (max_n >= 8) {
      std::printf("   n = 8 with each number of activation rows per thread (rpt):\n");
      for (int rpt : {1, 2, 4, 8}) row(8, rpt);
    }
  }
  return 0;
}
