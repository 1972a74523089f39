// Test-only helpers: random weight matrices in every checkpoint format, with owned storage.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/matrix.h"
#include "model/number_formats.h"

namespace flashserve::kernels {

struct TestMatrix {
  std::vector<uint8_t> data, scale;
  model::Matrix matrix;
};

inline std::vector<float> RandomVector(int64_t n, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

inline TestMatrix MakeTestMatrix(model::MatrixFormat format, int64_t rows, int64_t cols, int tile, std::mt19937& rng) {
  using model::MatrixFormat;
  TestMatrix t;
  model::Matrix& m = t.matrix;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255), exp(118, 130);
  switch (format) {
    case MatrixFormat::kF32: {
      t.data.resize(rows * cols * 4);
      for (int64_t i = 0; i < rows * cols; ++i) reinterpret_cast<float*>(t.data.data())[i] = dist(rng);
      break;
    }
    case MatrixFormat::kBF16:
    case MatrixFormat::kF16: {
      t.data.resize(rows * cols * 2);
      for (int64_t i = 0; i < rows * cols; ++i)
        reinterpret_cast<uint16_t*>(t.data.data())[i] =
            format == MatrixFormat::kBF16 ? model::FloatToBf16(dist(rng)) : model::FloatToF16(dist(rng));
      break;
    }
    case MatrixFormat::kFp8: {
      t.data.resize(rows * cols);
      for (auto& b : t.data) {
        b = static_cast<uint8_t>(byte(rng));
        if ((b & 0x7F) == 0x7F) b &= 0xFE;  // no NaN
      }
      m.tile_rows = m.tile_cols = tile;
      m.scale_cols = (cols + tile - 1) / tile;
      t.scale.resize(((rows + tile - 1) / tile) * m.scale_cols);
      for (auto& s : t.scale) s = static_cast<uint8_t>(exp(rng));
      break;
    }
    case MatrixFormat::kFp4: {
      t.data.resize(rows * cols / 2);
      for (auto& b : t.data) b = static_cast<uint8_t>(byte(rng));
      m.tile_rows = 1;
      m.tile_cols = 32;
      m.scale_cols = cols / 32;
      t.scale.resize(rows * m.scale_cols);
      for (auto& s : t.scale) s = static_cast<uint8_t>(exp(rng));
      break;
    }
  }
  m.data = t.data.data();
  m.scale = t.scale.empty() ? nullptr : t.scale.data();
  m.SetExponentRange();  // BF16, as the loader does for the head (the BF16-pair path needs it)
  return t;
}

// The reduction order documented in gemm/matmul_simd.h (`lanes` accumulators, FMA, FP4 blocks
// of 2 * lanes columns taken evens first, then the halving tree), or the portable 16-lane
// order (multiply, then add), emulated in scalar code on an exactly dequantized row. The CUDA
// kernels follow the 16-lane FMA order.
inline float DocumentedOrderDot(const float* w_row, const float* x, int64_t cols, int lanes, bool portable, bool fp4) {
  std::vector<float> acc(lanes, 0.0f);
  const int64_t padded = portable ? cols : (cols + lanes - 1) / lanes * lanes;
  for (int64_t p = 0; p < padded; ++p) {
    int64_t c = p;
    if (fp4 && !portable) {  // each 2L-column group: L even columns, then L odd ones
      const int64_t j = p % (2 * lanes);
      c = p - j + (j < lanes ? 2 * j : 2 * (j - lanes) + 1);
    }
    const float wv = c < cols ? w_row[c] : 0.0f, xv = c < cols ? x[c] : 0.0f;
    if (portable) {
      const float product = wv * xv;
      acc[p % lanes] += product;
    } else {
      acc[p % lanes] = std::fma(wv, xv, acc[p % lanes]);
    }
  }
  for (int width = lanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  return acc[0];
}

}  // namespace flashserve::kernels
