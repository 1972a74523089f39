// A weight matrix [rows = out features, cols = in features] viewed in place inside a mapped
// checkpoint (or a copy made at load: engine/model.h): plain float types, FP8 e4m3 with ue8m0
// tile scales, or packed FP4 e2m1 with one ue8m0 scale per 32 inputs. Cheap to copy; read-only;
// the kernels dequantize on the fly.
#pragma once

#include <cstdint>
#include <string>

namespace flashserve::model {

enum class MatrixFormat : uint8_t { kF32, kBF16, kF16, kFp8, kFp4 };

// Byte order of FP4 codes. kCheckpoint: byte c of a row holds columns 2c (low nibble) and
// 2c + 1. kLanePairs: each 32 columns are 16 bytes read as little-endian dwords D0..D3; pair
// c = 4L + j (columns 2c, 2c + 1) keeps column 2c + 1 in bits [4L, 4L + 4) of D_j and column
// 2c in bits [4L + 16, 4L + 20), so that one 128-bit broadcast and a shift per dword bring each
// 32-bit vector lane's two codes to the bottom of its 16-bit halves (the AVX-512 decoders,
// kernels/gemm). The rows go in groups of kFp4GroupRows: a group stores its rows' first 16-byte
// blocks one after another, then their second blocks, and so on, and its scales the same way
// (one byte per row per block), so that a register tile of a group's rows reads every block
// from one pointer (Fp4BlockOffset, Fp4ScaleIndex). Same bytes per matrix.
inline constexpr int64_t kFp4GroupRows = 8;
enum class Fp4Layout : uint8_t { kCheckpoint, kLanePairs };

struct Matrix {
  MatrixFormat format = MatrixFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;   // row-major; FP4: cols/2 bytes per row, in fp4_layout order
  const uint8_t* scale = nullptr;  // ue8m0 bytes, row-major [ceil(rows/tile_rows), ceil(cols/tile_cols)]
  int tile_rows = 1;               // FP8: B (e.g. 128 or 32); FP4: 1
  int tile_cols = 1;               // FP8: B; FP4: 32
  int64_t scale_cols = 0;          // entries per scale row
  // The smallest and largest scale byte where known (set at load by SetScaleRange; -1: not
  // known, and ScaleRange scans the scales on each call).
  int scale_lo = -1, scale_hi = -1;
  // BF16: the smallest and largest exponent field of the nonzero elements where known (set by
  // SetExponentRange; -1: not known). The AVX512-BF16 products take BF16 weights only where
  // known, so that they can rule out subnormal products without scanning the weights per call.
  int exp_lo = -1, exp_hi = -1;
  Fp4Layout fp4_layout = Fp4Layout::kCheckpoint;

  bool valid() const { return data != nullptr; }
  bool quantized() const { return format == MatrixFormat::kFp8 || format == MatrixFormat::kFp4; }
  int64_t RowBytes() const;
  // Scale bytes: one per tile (FP8) or per 32 inputs of a row (FP4); 0 without scales.
  int64_t NumScales() const;
  // Bytes a product reads: the weights and their scales.
  int64_t StoredBytes() const { return rows * RowBytes() + NumScales(); }
  // Rows [begin, end) as a matrix; for FP8, begin must be a multiple of tile_rows; for FP4 in
  // lane pairs, of kFp4GroupRows.
  Matrix RowSlice(int64_t begin, int64_t end) const;
  // The smallest and largest scale byte: the recorded ones, else a scan (255 and 0 without
  // scales). The products ask on every call.
  struct ByteRange {
    int lo = 255, hi = 0;
  };
  ByteRange ScaleRange() const;
  // Scans the scale bytes once and records their range.
  void SetScaleRange();
  // BF16: scans the elements once and records exp_lo and exp_hi (both 0 where all are zero).
  void SetExponentRange();
  // Exact value of element (r, c) (reference path and tests).
  float At(int64_t r, int64_t c) const;
  // FP4: the 4-bit code of element (r, c), in either layout.
  uint8_t Fp4Code(int64_t r, int64_t c) const;
  // FP4, either layout: the byte offset in `data` of the 16-byte block of columns
  // [32 * block, 32 * block + 32) of row r, and the index in `scale` of its scale.
  int64_t Fp4BlockOffset(int64_t r, int64_t block) const;
  int64_t Fp4ScaleIndex(int64_t r, int64_t block) const;
  // FP4 in checkpoint order with cols % 32 == 0 and rows % kFp4GroupRows == 0: writes the
  // rows * RowBytes() code bytes in the lane-pair layout to `out`, then the NumScales() scale
  // bytes regrouped, and returns this matrix reading both from there (StoredBytes() in all).
  Matrix RepackFp4LanePairs(uint8_t* out) const;
  std::string Describe() const;  // "FP8 [512, 256] tiles 128x128"
};

// A row-major f32 matrix over memory the caller keeps alive (activations used as a product's
// "weights", e.g. attention keys).
inline Matrix F32Matrix(const float* data, int64_t rows, int64_t cols) {
  Matrix m;
  m.format = MatrixFormat::kF32;
  m.rows = rows;
  m.cols = cols;
  m.data = reinterpret_cast<const uint8_t*>(data);
  return m;
}

}  // namespace flashserve::model
