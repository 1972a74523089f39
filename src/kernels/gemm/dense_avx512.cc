// AVX-512 instantiation of the dense products (kernels/gemm/dense_tiles.h): panels of 32 columns,
// tiles of 14 rows (28 accumulators of 32 registers). Built with AVX-512 flags; reached only
// through the dispatcher after a CPU check.
#include "kernels/gemm/dense_tiles.h"
#include "kernels/simd/avx512.h"

namespace flashserve::kernels::internal {
namespace {
struct V : simd::Avx512 {};  // internal linkage: no inline code of this ISA reaches another
}  // namespace

DenseKernel DenseAvx512() { return dense::Kernel<V, 14>(); }

}  // namespace flashserve::kernels::internal
