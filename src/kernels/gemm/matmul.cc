// Portable optimized matrix product (kernels/gemm/matmul.h): weight rows are dequantized in
// panels into a per-thread buffer and reused for every activation row; dot products use a
// fixed 16-lane partial-sum order, so results are independent of n and of the thread count.
#include <algorithm>
#include <vector>

#include "kernels/gemm/matmul.h"
#include "model/number_formats.h"

namespace flashserve::kernels {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kPanelRows = 16;

// Canonical dot product: 16 interleaved partial sums over k, then a fixed pairwise tree.
inline float Dot(const float* a, const float* b, int64_t k) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < k; ++i, ++l) acc[l] += a[i] * b[i];
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

void DequantizePanel(const model::Matrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t cols = w.cols;
  switch (w.format) {
    case model::MatrixFormat::kFp8: {
      const float* lut = model::E4m3Table();
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* q = w.data + r * cols;
        const uint8_t* s = w.scale + (r / w.tile_rows) * w.scale_cols;
        float* dst = out + (r - r0) * cols;
        for (int64_t c0 = 0; c0 < cols; c0 += w.tile_cols) {
          float scale = model::E8m0ToFloat(s[c0 / w.tile_cols]);
          int64_t c1 = std::min(cols, c0 + w.tile_cols);
          for (int64_t c = c0; c < c1; ++c) dst[c] = lut[q[c]] * scale;
        }
      }
      return;
    }
    case model::MatrixFormat::kFp4: {
      const float* lut = model::E2m1Table();
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* q = w.data + r * (cols / 2);
        const uint8_t* s = w.scale + r * w.scale_cols;
        float* dst = out + (r - r0) * cols;
        for (int64_t c = 0; c < cols; c += 2) {
          float scale = model::E8m0ToFloat(s[c / 32]);
          dst[c] = lut[q[c / 2] & 0xF] * scale;
          dst[c + 1] = lut[q[c / 2] >> 4] * scale;
        }
      }
      return;
    }
    default:
      DequantizeRows(w, r0, r1, out);
      return;
  }
}

}  // namespace

const char* MatMulIsa() { return "generic"; }

void MatMul(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
            base::ThreadPool& pool) {
  const int64_t num_panels = (w.rows + kPanelRows - 1) / kPanelRows;
  pool.ParallelFor(num_panels, 1, [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> panel;
    panel.resize(static_cast<size_t>(kPanelRows * w.cols));
    for (int64_t p = p0; p < p1; ++p) {
      int64_t r0 = p * kPanelRows, r1 = std::min(w.rows, r0 + kPanelRows);
      if (w.format == model::MatrixFormat::kF32) {
        for (int64_t i = 0; i < n; ++i)
          for (int64_t o = r0; o < r1; ++o)
            y[i * ldy + o] = Dot(reinterpret_cast<const float*>(w.data) + o * w.cols, x + i * ldx, w.cols);
        continue;
      }
      DequantizePanel(w, r0, r1, panel.data());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t o = r0; o < r1; ++o) y[i * ldy + o] = Dot(panel.data() + (o - r0) * w.cols, x + i * ldx, w.cols);
    }
  });
}

}  // namespace flashserve::kernels
