// The spread of the machine's memory read bandwidth over time: the roofline probe's 64 MiB
// windows (kernels::MemoryBandwidthWindows, as behind the floors of bench-forward and
// matmul_bench) read back to back for --seconds, then their quantiles. On a dedicated machine
// the median is within a few percent of the best window; on a shared host the best window is a
// moment when the neighbours left the memory alone, and the median is what a run of several
// seconds can expect. Measures and prints; asserts nothing.
//
// usage: bandwidth_bench [--seconds S (5)] [--threads N (all cores)] [--mib M (512, the buffer)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/roofline.h"

namespace {

constexpr const char* kUsage = "usage: bandwidth_bench [--seconds S] [--threads N] [--mib M]\n";

// The value after flag i as a positive number, or exit 2 with the usage.
double PositiveArg(int argc, char** argv, int i) {
  char* end = nullptr;
  const double v = i + 1 < argc ? std::strtod(argv[i + 1], &end) : 0.0;
  if (end == nullptr || *end != '\0' || !(v > 0)) {
    std::fprintf(stderr, "%s needs a positive number\n%s", argv[i], kUsage);
    std::exit(2);
  }
  return v;
}

double Quantile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5.0, mib = 512.0;
  int threads = 0;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = PositiveArg(argc, argv, i);
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = static_cast<int>(PositiveArg(argc, argv, i));
    } else if (std::strcmp(argv[i], "--mib") == 0) {
      mib = PositiveArg(argc, argv, i);
    } else {
      std::fprintf(stderr, "unknown flag %s\n%s", argv[i], kUsage);
      return 2;
    }
  }
  const int64_t bytes = static_cast<int64_t>(mib) << 20;
  if (bytes < (int64_t{64} << 20)) {
    std::fprintf(stderr, "--mib must be at least 64 (one window)\n");
    return 2;
  }
  flashserve::base::ThreadPool pool(threads);
  std::vector<double> rates;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    // 16 sweeps per buffer: most of the time goes to the timed windows, not to filling the buffer.
    const std::vector<double> sweep = flashserve::kernels::MemoryBandwidthWindows(pool, bytes, 16);
    rates.insert(rates.end(), sweep.begin(), sweep.end());
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%d threads, %zu windows of 64 MiB over %.1f s, GB/s: min %.1f  p10 %.1f  median %.1f  p90 %.1f  "
              "max %.1f\n",
              pool.num_threads(), rates.size(), seconds, rates.front(), Quantile(rates, 0.1), Quantile(rates, 0.5),
              Quantile(rates, 0.9), rates.back());
  return 0;
}
