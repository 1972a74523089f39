#include "kernels/activation/swiglu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/activation/exp_table.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {
namespace {

// ExpF against e^x in long double: within 0.502 ulp of the float result (the algorithm's bound),
// over a sweep of the float range where e^x is a normal float, and the edges exactly.
TEST(SwiGluTest, ExpFIsAccurate) {
  for (uint32_t bits = 0; bits < 0xFFFFFFFFu - 9973; bits += 9973) {
    const float x = std::bit_cast<float>(bits);
    if (!(x >= -87.0f && x <= 88.7f)) continue;
    const long double want = std::exp(static_cast<long double>(x));
    const float got = ExpF(x);
    const long double ulp = std::nextafter(static_cast<float>(want), INFINITY) - static_cast<float>(want);
    ASSERT_LE(std::fabs(static_cast<long double>(got) - want), 0.502L * ulp) << std::hexfloat << x;
  }
  EXPECT_EQ(ExpF(0.0f), 1.0f);
  EXPECT_EQ(ExpF(-0.0f), 1.0f);
  EXPECT_EQ(ExpF(INFINITY), INFINITY);
  EXPECT_EQ(ExpF(89.0f), INFINITY);
  EXPECT_EQ(ExpF(-INFINITY), 0.0f);
  EXPECT_EQ(ExpF(-110.0f), 0.0f);
  EXPECT_EQ(ExpF(-103.5f), 0x1p-149f);
  EXPECT_TRUE(std::isnan(ExpF(NAN)));
}

// Every one of the 2^32 floats against the system's expf (about 40 s; disabled, run with
// --gtest_also_run_disabled_tests): ExpF follows glibc's algorithm, so on a glibc machine the
// two agree bit for bit and a switch from expf to ExpF changes no result there.
TEST(SwiGluTest, DISABLED_ExpFEqualsTheSystemExpfForEveryFloat) {
  uint64_t differ = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; ++u) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
    const float want = std::exp(x), got = ExpF(x);
    if (std::isnan(want) && std::isnan(got)) continue;
    if (std::bit_cast<uint32_t>(want) != std::bit_cast<uint32_t>(got) && differ++ < 5)
      ADD_FAILURE() << std::hexfloat << x << ": expf " << want << ", ExpF " << got;
  }
  EXPECT_EQ(differ, 0u);
}

// The table holds 2^(i/32) rounded to double, minus i << 47.
TEST(SwiGluTest, ExpTableIsPowersOfTwo) {
  namespace t = internal::exp_table;
  for (int i = 0; i < 32; ++i) {
    const double entry = std::bit_cast<double>(t::kTable[i] + (uint64_t{static_cast<uint64_t>(i)} << 47));
    const long double exact = std::exp2(static_cast<long double>(i) / 32);
    EXPECT_LE(std::fabs(entry - exact), std::fabs(std::nextafter(entry, 2.0) - entry) / 2) << i;
  }
}

// The vector loops (those the CPU can run) give the scalar formula's bits for every length,
// with and without the clamps, on ordinary, huge, tiny, infinite and NaN inputs.
TEST(SwiGluTest, EveryLengthGivesTheScalarBits) {
  std::mt19937 rng(3);
  std::vector<float> gate(200), up(200);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  for (size_t i = 0; i < gate.size(); ++i) {
    gate[i] = normal(rng);
    up[i] = normal(rng);
  }
  const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 120.0f, -120.0f, 95.0f, -103.6f,
                            0.0f, -0.0f, 1e-40f, 10.0f, -10.0f, 10.5f};
  for (size_t i = 0; i < std::size(specials); ++i) {
    gate[3 * i + 1] = specials[i];
    up[3 * i + 2] = specials[(i + 5) % std::size(specials)];
  }
  using Loop = void (*)(const float*, const float*, int64_t, float, float, float*);
  std::vector<std::pair<const char*, Loop>> loops = {{"dispatched", &SwiGlu}};
  if (IsaSupported(Isa::kAvx2)) loops.emplace_back("avx2", &internal::SwiGluAvx2);
  if (IsaSupported(Isa::kAvx512)) loops.emplace_back("avx512", &internal::SwiGluAvx512);
  for (auto [name, loop] : loops) {
    for (float limit : {0.0f, 10.0f}) {
      for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 200}) {
        std::vector<float> got(n);
        loop(gate.data(), up.data(), n, limit, 0.375f, got.data());
        for (int64_t i = 0; i < n; ++i) {
          float g = gate[i], u = up[i];
          if (limit > 0.0f) {
            g = std::min(g, limit);
            u = std::clamp(u, -limit, limit);
          }
          const float want = 0.375f * (g / (1.0f + ExpF(-g)) * u);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got[i])) << name << " " << i;
          } else {
            EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want))
                << name << " n=" << n << " limit=" << limit << " i=" << i << " g=" << gate[i] << " u=" << up[i];
          }
        }
      }
    }
  }
  std::vector<float> in_place = gate;
  SwiGlu(in_place.data(), up.data(), 200, 10.0f, 1.0f, in_place.data());
  std::vector<float> apart(200);
  SwiGlu(gate.data(), up.data(), 200, 10.0f, 1.0f, apart.data());
  EXPECT_EQ(0, std::memcmp(in_place.data(), apart.data(), sizeof(float) * 200));
}

}  // namespace
}  // namespace flashserve::kernels
