// Reference matrix product and row dequantization (kernels/gemm/matmul.h).
#include <vector>

#include "kernels/gemm/matmul.h"

namespace flashserve::kernels {

void DequantizeRows(const model::Matrix& w, int64_t row_begin, int64_t row_end, float* out) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float* dst = out + (r - row_begin) * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) dst[c] = w.At(r, c);
  }
}

void MatMulReference(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t o = 0; o < w.rows; ++o) {
    DequantizeRows(w, o, o + 1, row.data());
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * ldx;
      double acc = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * xi[c];
      y[i * ldy + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace flashserve::kernels
