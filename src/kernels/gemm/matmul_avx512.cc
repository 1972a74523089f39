// AVX-512 instantiation of the vector matrix-product kernels (kernels/gemm/matmul_simd.h,
// matmul_panels.h) with the simd::Avx512 traits and its register-tile shapes. Compiled with AVX-512
// flags; reached only through the dispatcher after a CPU check.
#include "kernels/gemm/matmul_panels.h"
#include "kernels/simd/avx512.h"

namespace flashserve::kernels::internal {
namespace {

struct Avx512Tiles : simd::Avx512 {
  // Register tiles (activation rows x weight rows): up to 8 x 3 = 24 accumulators of 32
  // registers when weights are decoded in registers, 4 x 4, and 1 x 8 for a lone row.
  static constexpr int kWideMr = 8;
  static constexpr int kWideNr = 3;
  static constexpr int kMaxMr = 4;
  static constexpr int kSingleNr = 8;
};

}  // namespace

void MatMulRowsAvx512(const MatMulArgs& args, int64_t row_begin, int64_t row_end, float* scratch) {
  gemm::RunRows<Avx512Tiles>(args, row_begin, row_end, scratch);
}

}  // namespace flashserve::kernels::internal
