// AVX2 instantiation of the vector primitives (kernels/simd/vec_ops_simd.h). Compiled with the
// ISA's flags; reached only through GetVecOps after a CPU check.
#include "kernels/simd/avx2.h"
#include "kernels/simd/vec_ops_simd.h"

namespace flashserve::kernels::simd {

const VecOps& VecOpsAvx2() { return MakeVecOps<Avx2>(); }

}  // namespace flashserve::kernels::simd
