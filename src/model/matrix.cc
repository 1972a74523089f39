// Matrix element access and slicing (model/matrix.h).
#include "model/matrix.h"

#include <algorithm>
#include <cstring>

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
  FS_CHECK(format != MatrixFormat::kFp4 || fp4_layout == Fp4Layout::kCheckpoint || begin % kFp4GroupRows == 0,
           "row slice start %ld of FP4 lane pairs not aligned to their %ld-row groups", static_cast<long>(begin),
           static_cast<long>(kFp4GroupRows));
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

void Matrix::SetExponentRange() {
  if (format != MatrixFormat::kBF16) return;
  const int64_t count = rows * cols;
  int lo = 255, hi = 0;
  for (int64_t i = 0; i < count; ++i) {  // zeros (either sign) count as neither
    uint16_t v = 0;
    std::memcpy(&v, data + 2 * i, 2);  // a payload need not be 2-byte aligned
    const int field = (v >> 7) & 0xFF;
    const bool nonzero = (v & 0x7FFF) != 0;
    lo = std::min(lo, nonzero ? field : 255);
    hi = std::max(hi, nonzero ? field : 0);
  }
  exp_lo = lo == 255 && hi == 0 ? 0 : lo;
  exp_hi = hi;
}

float Matrix::At(int64_t r, int64_t c) const {
  const uint8_t* row = data + r * RowBytes();
  switch (format) {
    case MatrixFormat::kF32: {
      float v = 0;
      std::memcpy(&v, row + 4 * c, 4);  // payloads need not be aligned to their element size
      return v;
    }
    case MatrixFormat::kBF16: {
      uint16_t v = 0;
      std::memcpy(&v, row + 2 * c, 2);
      return Bf16ToFloat(v);
    }
    case MatrixFormat::kF16: {
      uint16_t v = 0;
      std::memcpy(&v, row + 2 * c, 2);
      return F16ToFloat(v);
    }
    case MatrixFormat::kFp8:
      return E4m3ToFloat(row[c]) * E8m0ToFloat(scale[(r / tile_rows) * scale_cols + c / tile_cols]);
    case MatrixFormat::kFp4: return E2m1ToFloat(Fp4Code(r, c)) * E8m0ToFloat(scale[Fp4ScaleIndex(r, c / tile_cols)]);
  }
  return 0.0f;
}

int64_t Matrix::Fp4BlockOffset(int64_t r, int64_t block) const {
  if (fp4_layout == Fp4Layout::kCheckpoint) return r * RowBytes() + 16 * block;
  return (r - r % kFp4GroupRows) * RowBytes() + (block * kFp4GroupRows + r % kFp4GroupRows) * 16;
}

int64_t Matrix::Fp4ScaleIndex(int64_t r, int64_t block) const {
  if (fp4_layout == Fp4Layout::kCheckpoint) return r * scale_cols + block;
  return (r - r % kFp4GroupRows) * scale_cols + block * kFp4GroupRows + r % kFp4GroupRows;
}

uint8_t Matrix::Fp4Code(int64_t r, int64_t c) const {
  if (fp4_layout == Fp4Layout::kCheckpoint) {
    const uint8_t* row = data + r * RowBytes();
    return c % 2 == 0 ? row[c / 2] & 0xF : row[c / 2] >> 4;
  }
  const uint8_t* block = data + Fp4BlockOffset(r, c / 32);
  const int pair = static_cast<int>(c % 32 / 2), j = pair % 4, lane_group = pair / 4;
  const uint32_t dword = block[4 * j] | block[4 * j + 1] << 8 | block[4 * j + 2] << 16 | uint32_t{block[4 * j + 3]} << 24;
  return static_cast<uint8_t>(dword >> (4 * lane_group + (c % 2 == 0 ? 16 : 0)) & 0xF);
}

namespace {
// The four low (high) nibbles of x's bytes, packed: nibble L from byte L.
uint32_t LowNibbles(uint32_t x) {
  x &= 0x0F0F0F0Fu;
  x = (x | x >> 4) & 0x00FF00FFu;
  return (x | x >> 8) & 0xFFFFu;
}
}  // namespace

Matrix Matrix::RepackFp4LanePairs(uint8_t* out) const {
  FS_CHECK(format == MatrixFormat::kFp4 && fp4_layout == Fp4Layout::kCheckpoint && cols % 32 == 0 &&
               rows % kFp4GroupRows == 0 && tile_cols == 32,
           "lane-pair repacking needs an FP4 matrix in checkpoint order with cols %% 32 == 0 and rows %% %ld == 0: %s",
           static_cast<long>(kFp4GroupRows), Describe().c_str());
  Matrix m = *this;
  m.data = out;
  uint8_t* scales = out + rows * RowBytes();
  m.scale = scales;
  m.fp4_layout = Fp4Layout::kLanePairs;
  const int64_t blocks_per_row = cols / 32;
  for (int64_t r = 0; r < rows; ++r) {
    // As Fp4BlockOffset and Fp4ScaleIndex, stepped per block: the copy streams at load.
    const int64_t in_group = r % kFp4GroupRows, first = r - in_group;
    const uint8_t* in = data + r * RowBytes();
    const uint8_t* in_scale = scale + r * scale_cols;
    uint8_t* block = out + first * RowBytes() + in_group * 16;
    uint8_t* out_scale = scales + first * scale_cols + in_group;
    for (int64_t b = 0; b < blocks_per_row; ++b, in += 16, block += 16 * kFp4GroupRows) {
      for (int j = 0; j < 4; ++j) {
        // Byte L of x: pair 4L + j, whose odd column (high nibble) goes to bits [4L, 4L + 4) and
        // even column (low nibble) to bits [4L + 16, 4L + 20).
        const uint32_t x = in[j] | in[4 + j] << 8 | in[8 + j] << 16 | uint32_t{in[12 + j]} << 24;
        const uint32_t dword = LowNibbles(x >> 4) | LowNibbles(x) << 16;
        for (int k = 0; k < 4; ++k) block[4 * j + k] = static_cast<uint8_t>(dword >> (8 * k));
      }
      out_scale[b * kFp4GroupRows] = in_scale[b];
    }
  }
  return m;
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
  if (format == MatrixFormat::kFp4 && fp4_layout == Fp4Layout::kLanePairs) s += " (lane pairs)";
  return s;
}

}  // namespace flashserve::model
