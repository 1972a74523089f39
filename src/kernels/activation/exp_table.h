// ExpF's constants and its one-value forms (ExpScalar, PoolFoldScalar, SwiGluScalar), shared by
// swiglu.cc and softmax_pool.cc (the portable paths) and the AVX2 / AVX-512 loops (their
// constants, and AVX2's tails), so that every path does the same operations: e^x = 2^(k/32) *
// 2^(r/32) with k = round(x * 32 / ln 2), 2^(k/32) from the table, 2^(r/32) by a cubic. Internal to kernels/activation; pure functions.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace flashserve::kernels::internal::exp_table {

constexpr int kBits = 5;                                // 32 entries
constexpr double kInvLn2Scaled = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double kShift = 0x1.8p+52;                     // rounds to an integer in the low bits
// 2^(r/32) ~ 1 + r (c2 + r c1 + r^2 c0) for |r| <= 1/2.
constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;
// Bits of 2^(i/32) (rounded to double) minus i << 47, so that adding k << 47 gives 2^(k/32).
constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
// Outside [kMinNormal, kMax] the table path is not used: above kMax +inf, below kMin 0,
// between kMin and kMinNormal the smallest subnormal.
constexpr float kMax = 0x1.62e42ep6f, kMin = -0x1.9fe368p6f, kMinNormal = -0x1.9d1d9ep6f;

// ExpF (activation/swiglu.h) one value at a time: each step one IEEE operation or one fused
// multiply-add, as in the vector code. Inline, so that files built with FMA flags use the
// instruction instead of a libm call.
inline float ExpScalar(float x) {
  if (std::isnan(x)) return x + x;
  if (x > kMax) return INFINITY;
  if (x < kMin) return 0.0f;
  if (x < kMinNormal) return 0x1p-149f;
  // x = (k + r) ln 2 / 32 with k an integer and |r| <= 1/2: e^x = 2^(k/32) 2^(r/32).
  const double xd = x;
  const double z = std::fma(kInvLn2Scaled, xd, kShift);  // k in the low bits
  const uint64_t k = std::bit_cast<uint64_t>(z);
  const double kd = z - kShift;
  const double r = std::fma(kInvLn2Scaled, xd, -kd);
  const double s = std::bit_cast<double>(kTable[k % 32] + (k << (52 - kBits)));
  const double p = std::fma(r, kC0, kC1);
  const double r2 = r * r;
  double y = std::fma(r, kC2, 1.0);
  y = std::fma(p, r2, y);
  return static_cast<float>(y * s);
}

// One channel of SoftmaxPoolFold (activation/softmax_pool.h).
inline void PoolFoldScalar(float a, float z, float& max, float& sum, float& wsum) {
  const float e = ExpScalar(-std::fabs(z - max));
  if (z > max) {
    sum = sum * e + 1.0f;
    wsum = wsum * e + a;
    max = z;
  } else {
    sum = sum + e;
    wsum = wsum + e * a;
  }
}

// One SwiGlu element (activation/swiglu.h).
inline float SwiGluScalar(float g, float u, float limit, float weight) {
  if (limit > 0.0f) {
    g = limit < g ? limit : g;                         // std::min(g, limit)
    u = u < -limit ? -limit : limit < u ? limit : u;  // std::clamp(u, -limit, limit)
  }
  return weight * (g / (1.0f + ExpScalar(-g)) * u);
}

}  // namespace flashserve::kernels::internal::exp_table
