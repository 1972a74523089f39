// SoftmaxPoolFold (activation/softmax_pool.h): the scalar loop and the ISA dispatch.
#include "kernels/activation/softmax_pool.h"

#include "kernels/activation/exp_table.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {

void SoftmaxPoolFold(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum) {
  const Isa isa = BestIsa();
  if (isa == Isa::kAvx512) {
    internal::SoftmaxPoolFoldAvx512(a, z, n, max, sum, wsum);
  } else if (isa == Isa::kAvx2) {
    internal::SoftmaxPoolFoldAvx2(a, z, n, max, sum, wsum);
  } else {
    for (int64_t k = 0; k < n; ++k) internal::exp_table::PoolFoldScalar(a[k], z[k], max[k], sum[k], wsum[k]);
  }
}

}  // namespace flashserve::kernels
