// Run-time instruction-set detection (kernels/simd/isa.h).
#include "kernels/simd/isa.h"

#include <algorithm>
#include <chrono>
#include <limits>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <xmmintrin.h>
#endif

namespace flashserve::kernels {
namespace {

// Seconds for `steps` dependent multiplies of `start` by one (volatile reads, so that the
// compiler keeps the chain and cannot fold it).
double MultiplyChainSeconds(float start, int steps) {
  volatile float start_in = start, one_in = 1.0f, sink = 0.0f;
  float x = start_in;
  const float one = one_in;
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) x *= one;
  const auto end = std::chrono::steady_clock::now();
  sink = x;
  (void)sink;
  return std::chrono::duration<double>(end - begin).count();
}

bool MeasureSubnormalsSlow() {
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr & ~0x8040u);  // FTZ and DAZ off, as the kernels that care run
#endif
  constexpr int kSteps = 4096, kTries = 3;
  double normal = std::numeric_limits<double>::infinity(), subnormal = normal;
  for (int t = 0; t < kTries; ++t) {  // the fastest of each: a preemption cannot fake a ratio
    normal = std::min(normal, MultiplyChainSeconds(1.0f, kSteps));
    subnormal = std::min(subnormal, MultiplyChainSeconds(1e-40f, kSteps));
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(csr);
#endif
  return subnormal > 4 * normal;  // a core that takes assists (Emerald Rapids) is far above 4x
}

}  // namespace

// F16C by CPUID (leaf 1, ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
static bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}

// Detected once: CPUID traps to the hypervisor in a virtual machine (microseconds a call), and
// kernels check their ISA on every call.
bool IsaSupported(Isa isa) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case Isa::kGeneric:
      return true;
    case Isa::kAvx2:
      return avx2;
    case Isa::kAvx512:
      return avx512;
  }
  return false;
}

Isa BestIsa() {
  static const Isa best = IsaSupported(Isa::kAvx512) ? Isa::kAvx512
                          : IsaSupported(Isa::kAvx2) ? Isa::kAvx2
                                                     : Isa::kGeneric;
  return best;
}

bool Avx512Bf16Supported() {
  static const bool supported = IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512bf16") &&
                                __builtin_cpu_supports("avx512vbmi");
  return supported;
}

bool AmxSupported() {
#if defined(__x86_64__)
  static const bool supported = [] {
    unsigned a, b, c, d;
    if (!Avx512Bf16Supported() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx = (d >> 22 & 1) != 0 && (d >> 24 & 1) != 0;  // AMX-BF16, AMX-TILE
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
    return amx && syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return supported;
#else
  return false;
#endif
}

bool SubnormalOperandsAreSlow() {
  static const bool slow = MeasureSubnormalsSlow();
  return slow;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

}  // namespace flashserve::kernels
