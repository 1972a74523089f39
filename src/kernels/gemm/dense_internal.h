// The dense products' per-ISA entry points (kernels/gemm/dense.h), defined by dense.cc (portable),
// dense_avx2.cc and dense_avx512.cc; the dispatcher in dense.cc picks one per process.
#pragma once

#include <cstdint>

namespace flashserve::kernels::internal {

struct DenseKernel {
  int64_t panel = 0;  // columns per packed panel
  int64_t rows = 0;   // rows per register tile
  void (*product)(const float* a, int64_t m, int64_t lda, const float* packed, int64_t k, int64_t n, float* c,
                  int64_t ldc, bool accumulate) = nullptr;
};

DenseKernel DenseAvx512();
DenseKernel DenseAvx2();
DenseKernel DensePortable();
// PackDenseCols with panels of `panel` columns (tests of every kernel).
void PackDenseColsAs(int64_t panel, const float* b, int64_t k, int64_t n, int64_t ld, float* packed, int64_t k_begin,
                     int64_t k_end);

}  // namespace flashserve::kernels::internal
