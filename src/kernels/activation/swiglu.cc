// ExpF and SwiGlu (activation/swiglu.h): the scalar reference and the ISA dispatch.
#include "kernels/activation/swiglu.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "kernels/activation/exp_table.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {

float ExpF(float x) {
  namespace t = internal::exp_table;
  if (std::isnan(x)) return x + x;
  if (x > t::kMax) return INFINITY;
  if (x < t::kMin) return 0.0f;
  if (x < t::kMinNormal) return 0x1p-149f;
  // x = (k + r) ln 2 / 32 with k an integer and |r| <= 1/2: e^x = 2^(k/32) 2^(r/32). Every step
  // is one IEEE operation or one fused multiply-add, as in the vector code.
  const double xd = x;
  const double z = std::fma(t::kInvLn2Scaled, xd, t::kShift);  // k in the low bits
  const uint64_t k = std::bit_cast<uint64_t>(z);
  const double kd = z - t::kShift;
  const double r = std::fma(t::kInvLn2Scaled, xd, -kd);
  const double s = std::bit_cast<double>(t::kTable[k % 32] + (k << (52 - t::kBits)));
  const double p = std::fma(r, t::kC0, t::kC1);
  const double r2 = r * r;
  double y = std::fma(r, t::kC2, 1.0);
  y = std::fma(p, r2, y);
  return static_cast<float>(y * s);
}

void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float weight, float* out) {
  int64_t i = 0;
  if (BestIsa() == Isa::kAvx512) i = internal::SwiGluAvx512(gate, up, n, limit, weight, out);
  for (; i < n; ++i) {
    float g = gate[i], u = up[i];
    if (limit > 0.0f) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    out[i] = weight * (g / (1.0f + ExpF(-g)) * u);
  }
}

}  // namespace flashserve::kernels
