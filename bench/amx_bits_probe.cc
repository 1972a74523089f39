// Which summation orders give the bits of AMX's TDPBF16PS and of VDPBF16PS, measured: the facts
// an AMX instruction set for the matrix products must respect to keep a row's bits independent
// of its batch (docs/benchmarks.md, "CPU kernels", Emerald Rapids). Prints, for random BF16 values
// (exponents -20..20, both signs; 20 tiles of 16 x 16 outputs over K = 2048), how many outputs
// differ between:
//   - VDPBF16PS with weight rows across the lanes (activation pair broadcast) and sequential
//     FMAs, the high product of each pair first;
//   - TDPBF16PS and those sequential FMAs; and the sum of each instruction's 32 products in long
//     double, added with one rounding to nearest;
//   - TDPBF16PS on 1-row tiles and on 16-row tiles; with 16 K columns per instruction and 32.
// Usage: amx_bits_probe. Exits 0 without measuring where the CPU or the kernel lacks AMX.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr int kM = 16, kN = 16, kK = 2048, kTrials = 20;

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool HasAmxBf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx = (d >> 22 & 1) && (d >> 24 & 1);  // AMX-BF16, AMX-TILE
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return amx && __builtin_cpu_supports("avx512bf16") && syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
}

float FromBf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t RandomBf16(std::mt19937& rng) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20), sign(0, 1);
  const float f = (sign(rng) ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), exponent(rng));
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // truncated: an exact BF16 value
}

// C[m][n] = A[m] . W[n] through TDPBF16PS: `rows` activation rows per tile, `step` K columns
// per instruction. b: W as the instruction's pair rows (pair kk of W row n at b[kk * kN + n]).
__attribute__((target("amx-tile,amx-bf16"))) void AmxProduct(const std::vector<uint16_t>& a, const std::vector<uint32_t>& b, int rows, int step, float* c) {
  TileConfig cfg;
  cfg.rows[0] = static_cast<uint8_t>(rows);
  cfg.colsb[0] = kN * 4;
  cfg.rows[1] = static_cast<uint8_t>(rows);
  cfg.colsb[1] = static_cast<uint16_t>(step * 2);
  cfg.rows[2] = static_cast<uint8_t>(step / 2);
  cfg.colsb[2] = kN * 4;
  _tile_loadconfig(&cfg);
  for (int m0 = 0; m0 < kM; m0 += rows) {
    _tile_zero(0);
    for (int k0 = 0; k0 < kK; k0 += step) {
      _tile_loadd(1, a.data() + m0 * kK + k0, kK * 2);
      _tile_loadd(2, b.data() + (k0 / 2) * kN, kN * 4);
      _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, c + m0 * kN, kN * 4);
  }
  _tile_release();
}

__attribute__((target("avx512f,avx512bf16"))) void VectorProduct(const std::vector<uint16_t>& a,
                                                                  const std::vector<uint32_t>& b, float* c) {
  for (int m = 0; m < kM; ++m) {
    __m512 acc = _mm512_setzero_ps();
    for (int kk = 0; kk < kK / 2; ++kk) {
      const uint32_t pair = a[m * kK + 2 * kk] | uint32_t{a[m * kK + 2 * kk + 1]} << 16;
      const __m512i w = _mm512_loadu_si512(b.data() + kk * kN);
      acc = _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)_mm512_set1_epi32(static_cast<int>(pair)));
    }
    _mm512_storeu_ps(c + m * kN, acc);
  }
}

long Differ(const float* x, const float* y) {
  long n = 0;
  for (int i = 0; i < kM * kN; ++i) n += std::memcmp(&x[i], &y[i], 4) != 0;
  return n;
}

int Run() {
  std::mt19937 rng(1);
  long vec_vs_fma = 0, amx_vs_fma = 0, amx_vs_exact = 0, rows_1_vs_16 = 0, step_16_vs_32 = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<uint16_t> a(kM * kK), w(kN * kK);
    for (uint16_t& v : a) v = RandomBf16(rng);
    for (uint16_t& v : w) v = RandomBf16(rng);
    std::vector<uint32_t> b(kK / 2 * kN);
    for (int kk = 0; kk < kK / 2; ++kk)
      for (int n = 0; n < kN; ++n) b[kk * kN + n] = w[n * kK + 2 * kk] | uint32_t{w[n * kK + 2 * kk + 1]} << 16;
    std::vector<float> fma(kM * kN), exact(kM * kN), vec(kM * kN), amx(kM * kN), amx_1(kM * kN), amx_16(kM * kN);
    for (int m = 0; m < kM; ++m)
      for (int n = 0; n < kN; ++n) {
        float seq = 0.0f, once = 0.0f;
        for (int k0 = 0; k0 < kK; k0 += 32) {
          long double sum = 0;
          for (int k = k0; k < k0 + 32; k += 2) {
            const float hi_a = FromBf16(a[m * kK + k + 1]), hi_w = FromBf16(w[n * kK + k + 1]);
            const float lo_a = FromBf16(a[m * kK + k]), lo_w = FromBf16(w[n * kK + k]);
            seq = std::fma(lo_a, lo_w, std::fma(hi_a, hi_w, seq));
            sum += static_cast<long double>(hi_a) * hi_w + static_cast<long double>(lo_a) * lo_w;
          }
          once = static_cast<float>(once + sum);
        }
        fma[m * kN + n] = seq;
        exact[m * kN + n] = once;
      }
    VectorProduct(a, b, vec.data());
    AmxProduct(a, b, 16, 32, amx.data());
    AmxProduct(a, b, 1, 32, amx_1.data());
    AmxProduct(a, b, 16, 16, amx_16.data());
    vec_vs_fma += Differ(vec.data(), fma.data());
    amx_vs_fma += Differ(amx.data(), fma.data());
    amx_vs_exact += Differ(amx.data(), exact.data());
    rows_1_vs_16 += Differ(amx_1.data(), amx.data());
    step_16_vs_32 += Differ(amx_16.data(), amx.data());
  }
  const long total = long{kTrials} * kM * kN;
  std::printf("outputs that differ, of %ld:\n", total);
  std::printf("  VDPBF16PS (weight rows across lanes) vs sequential FMAs:      %ld\n", vec_vs_fma);
  std::printf("  TDPBF16PS vs sequential FMAs:                                 %ld\n", amx_vs_fma);
  std::printf("  TDPBF16PS vs long-double sum per instruction, one rounding:   %ld\n", amx_vs_exact);
  std::printf("  TDPBF16PS 1-row tiles vs 16-row tiles:                        %ld\n", rows_1_vs_16);
  std::printf("  TDPBF16PS 16 K columns per instruction vs 32:                 %ld\n", step_16_vs_32);
  return 0;
}

}  // namespace

int main() {
  if (!HasAmxBf16()) {
    std::puts("amx_bits_probe: this CPU (or kernel) has no AMX-BF16 with AVX512-BF16; nothing measured");
    return 0;
  }
  return Run();
}

#else
int main() {
  std::puts("amx_bits_probe: x86-64 only; nothing measured");
  return 0;
}
#endif
