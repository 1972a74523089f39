// ExpShiftedSum (activation/softmax_row.h): the scalar loop, the lane tree and the ISA dispatch.
#include "kernels/activation/softmax_row.h"

#include <algorithm>
#include <cmath>

#include "kernels/simd/constants.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {

namespace internal {

float TaylorExp(float x) {
  using simd::kExpMin, simd::kExpTaylor, simd::kLn2Hi, simd::kLn2Lo, simd::kLog2e;
  x = std::max(kExpMin, x);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  float p = kExpTaylor[0];
  for (int i = 1; i < 8; ++i) p = std::fma(p, r, kExpTaylor[i]);
  return std::ldexp(p, static_cast<int>(n));
}

void ExpShiftedScalar(float* x, int64_t from, int64_t n, float scaled_max, float scale, float* lanes) {
  for (int64_t j = from; j < n; ++j) {
    const float scaled = x[j] * scale;
    x[j] = TaylorExp(scaled - scaled_max);
    lanes[j % 16] += x[j];
  }
}

float CombineLanes(const float* lanes) {
  float level[16];
  std::copy_n(lanes, 16, level);
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) level[l] = level[l] + level[l + width];
  return level[0];
}

}  // namespace internal

float ExpShiftedSum(float* x, int64_t n, float scale) {
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) return internal::ExpShiftedSumAvx512(x, n, internal::RowMaxAvx512(x, n) * scale, scale);
  if (isa == Isa::kAvx2) return internal::ExpShiftedSumAvx2(x, n, internal::RowMaxAvx2(x, n) * scale, scale);
  float top = x[0];
  for (int64_t j = 1; j < n; ++j) top = std::max(top, x[j]);
  const float scaled_max = top * scale;
  float lanes[16] = {};
  internal::ExpShiftedScalar(x, 0, n, scaled_max, scale, lanes);
  return internal::CombineLanes(lanes);
}

}  // namespace flashserve::kernels
