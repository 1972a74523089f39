// AVX-512 instantiation of the vector primitives (kernels/simd/vec_ops_simd.h). Compiled with the
// ISA's flags; reached only through GetVecOps after a CPU check.
#include "kernels/simd/avx512.h"
#include "kernels/simd/vec_ops_simd.h"

namespace flashserve::kernels::simd {

const VecOps& VecOpsAvx512() { return MakeVecOps<Avx512>(); }

}  // namespace flashserve::kernels::simd
