// AVX2 instantiation of the dense products (kernels/gemm/dense_tiles.h): panels of 16 columns,
// tiles of 6 rows (12 accumulators of 16 registers). Built with AVX2 flags; reached only
// through the dispatcher after a CPU check.
#include "kernels/gemm/dense_tiles.h"
#include "kernels/simd/avx2.h"

namespace flashserve::kernels::internal {
namespace {
struct V : simd::Avx2 {};  // internal linkage: no inline code of this ISA reaches another
}  // namespace

DenseKernel DenseAvx2() { return dense::Kernel<V, 6>(); }

}  // namespace flashserve::kernels::internal
