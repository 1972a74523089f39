// ExpF and SwiGlu (activation/swiglu.h): the scalar reference and the ISA dispatch.
#include "kernels/activation/swiglu.h"

#include "kernels/activation/exp_table.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {

float ExpF(float x) { return internal::exp_table::ExpScalar(x); }

void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float weight, float* out) {
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) {
    internal::SwiGluAvx512(gate, up, n, limit, weight, out);
  } else if (isa == Isa::kAvx2) {
    internal::SwiGluAvx2(gate, up, n, limit, weight, out);
  } else {  // std::fma without the instruction: slow, but the same bits
    for (int64_t i = 0; i < n; ++i) out[i] = internal::exp_table::SwiGluScalar(gate[i], up[i], limit, weight);
  }
}

}  // namespace flashserve::kernels
