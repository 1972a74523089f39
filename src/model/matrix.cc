// Matrix element access and slicing (model/matrix.h).
#include "model/matrix.h"

#include <algorithm>

#include "base/check.h"
#include "model/number_formats.h"

namespace flashserve::model {

int64_t Matrix::RowBytes() const {
  switch (format) {
    case MatrixFormat::kF32: return cols * 4;
    case MatrixFormat::kBF16:
    case MatrixFormat::kF16: return cols * 2;
    case MatrixFormat::kFp8: return cols;
    case MatrixFormat::kFp4: return cols / 2;
  }
  return 0;
}

int64_t Matrix::NumScales() const {
  return scale == nullptr ? 0 : (rows + tile_rows - 1) / tile_rows * scale_cols;
}

Matrix Matrix::RowSlice(int64_t begin, int64_t end) const {
  FS_CHECK(0 <= begin && begin <= end && end <= rows, "row slice [%ld, %ld) of %ld rows",
           static_cast<long>(begin), static_cast<long>(end), static_cast<long>(rows));
  FS_CHECK(begin % tile_rows == 0, "row slice start %ld not aligned to tile %d", static_cast<long>(begin), tile_rows);
  Matrix m = *this;
  m.rows = end - begin;
  m.data = data + begin * RowBytes();
  if (scale != nullptr) m.scale = scale + (begin / tile_rows) * scale_cols;
  m.scale_lo = m.scale_hi = -1;  // the slice's own range may be narrower
  return m;
}

Matrix::ByteRange Matrix::ScaleRange() const {
  if (scale_lo >= 0) return ByteRange{scale_lo, scale_hi};
  const int64_t n = NumScales();
  uint8_t lo = 255, hi = 0;
  for (int64_t i = 0; i < n; ++i) {  // a plain loop: vectorised, unlike minmax_element
    lo = std::min(lo, scale[i]);
    hi = std::max(hi, scale[i]);
  }
  return ByteRange{lo, hi};
}

void Matrix::SetScaleRange() {
  if (NumScales() == 0) return;
  scale_lo = scale_hi = -1;
  const ByteRange r = ScaleRange();
  scale_lo = r.lo;
  scale_hi = r.hi;
}

float Matrix::At(int64_t r, int64_t c) const {
  const uint8_t* row = data + r * RowBytes();
  switch (format) {
    case MatrixFormat::kF32: return reinterpret_cast<const float*>(row)[c];
    case MatrixFormat::kBF16: return Bf16ToFloat(reinterpret_cast<const uint16_t*>(row)[c]);
    case MatrixFormat::kF16: return F16ToFloat(reinterpret_cast<const uint16_t*>(row)[c]);
    case MatrixFormat::kFp8:
      return E4m3ToFloat(row[c]) * E8m0ToFloat(scale[(r / tile_rows) * scale_cols + c / tile_cols]);
    case MatrixFormat::kFp4: {
      uint8_t byte = row[c / 2];
      uint8_t code = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      return E2m1ToFloat(code) * E8m0ToFloat(scale[r * scale_cols + c / tile_cols]);
    }
  }
  return 0.0f;
}

std::string Matrix::Describe() const {
  const char* name = "F32";
  switch (format) {
    case MatrixFormat::kF32: name = "F32"; break;
    case MatrixFormat::kBF16: name = "BF16"; break;
    case MatrixFormat::kF16: name = "F16"; break;
    case MatrixFormat::kFp8: name = "FP8"; break;
    case MatrixFormat::kFp4: name = "FP4"; break;
  }
  std::string s = std::string(name) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  if (quantized()) s += " tiles " + std::to_string(tile_rows) + "x" + std::to_string(tile_cols);
  return s;
}

}  // namespace flashserve::model
