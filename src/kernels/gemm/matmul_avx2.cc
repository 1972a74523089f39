// AVX2 instantiation of the vector matrix-product kernels (kernels/gemm/matmul_simd.h,
// matmul_panels.h) with the simd::Avx2 traits and its register-tile shapes. Compiled with AVX2
// flags; reached only through the dispatcher after a CPU check.
#include "kernels/gemm/matmul_panels.h"
#include "kernels/simd/avx2.h"

namespace flashserve::kernels::internal {
namespace {

struct Avx2Tiles : simd::Avx2 {
  // Register tiles: 2 x 4 = 8 accumulators of 16 registers; 1 x 4 for a lone activation row.
  static constexpr int kWideMr = 0;
  [[maybe_unused]] static constexpr int kWideNr = 0;  // no wide tiles (kWideMr = 0)
  static constexpr int kMaxMr = 2;
  static constexpr int kSingleNr = 4;
};

}  // namespace

void MatMulRowsAvx2(const MatMulArgs& args, int64_t row_begin, int64_t row_end, float* scratch) {
  gemm::RunRows<Avx2Tiles>(args, row_begin, row_end, scratch);
}

}  // namespace flashserve::kernels::internal
