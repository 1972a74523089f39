// Launch seam between the host code (cuda_matmul.cc, built by the C++ compiler) and the CUDA
// kernels (exact_matmul_kernels.cu, built by nvcc): plain data and plain functions, so that
// neither side includes the other's headers. Launches are asynchronous on `stream`.
#pragma once

#include <cstdint>

namespace flashserve::kernels::cuda::internal {

// Weight formats, numbered as model::MatrixFormat.
enum class Format : int { kF32 = 0, kBF16 = 1, kF16 = 2, kFp8 = 3, kFp4 = 4 };

// The lane-major layout (lane_major.h packs it on the host): a row is
// `groups` groups of 256 bytes; in each, lane l's 16 bytes hold its elements of
// BlocksPerGroup consecutive blocks, block by block.
// A block is the 16 columns one step of a 16-lane accumulator takes (FP4: 32 columns, two per
// lane: byte l of the block's 16 bytes). Elements past the row are zero.
constexpr int kLanes = 16;
constexpr int kGroupBytes = kLanes * 16;
constexpr int BlocksPerGroup(Format f) {  // FP8, FP4: 16; BF16, F16: 8; F32: 4 (16 bytes per lane)
  return f == Format::kF32 ? 4 : (f == Format::kBF16 || f == Format::kF16) ? 8 : 16;
}
constexpr int ColumnsPerBlock(Format f) { return f == Format::kFp4 ? 32 : 16; }
constexpr int64_t GroupsPerRow(Format f, int64_t cols) {
  const int64_t per_group = int64_t{BlocksPerGroup(f)} * ColumnsPerBlock(f);
  return (cols + per_group - 1) / per_group;
}
// Scale bytes per padded scale row: FP4 groups * 16; FP8 the tiles of every group's columns,
// rounded up to 16 bytes.
constexpr int64_t ScaleStride(Format f, int64_t groups, int tile_cols) {
  const int64_t bytes = f == Format::kFp4 ? groups * 16 : (groups * BlocksPerGroup(f) * 16 + tile_cols - 1) / tile_cols;
  return (bytes + 15) / 16 * 16;
}
// Weights (and packed activations) per lane per group: columns per block / 16 * blocks per group.
constexpr int PackedXPerLane(Format f) { return BlocksPerGroup(f) * ColumnsPerBlock(f) / kLanes; }

struct ExactMatMulLaunch {
  Format format = Format::kF32;
  int64_t rows = 0, cols = 0, groups = 0;
  const uint8_t* w = nullptr;       // rows * groups * kGroupBytes
  // Scale bytes, rows padded with 127 to scale_stride (FP4: groups * 16, 16-byte aligned; FP8:
  // enough tiles for every group): FP8 [ceil(rows / tile_rows), scale_stride]; FP4 [rows, scale_stride].
  const uint8_t* scale = nullptr;
  int64_t scale_stride = 0;
  bool fast_scales = false;         // every real scale byte in FP8 1..246 / FP4 1..128 (see the kernels)
  bool fp8_nan_codes = false;       // some FP8 scale byte > 246: codes 0x7F / 0xFF read as NaN (CPU scalar path)
  int tile_rows = 1;
  int tile_shift = 0;               // FP8: log2(tile_cols), tile_cols a power of two >= 16
  const float* xp = nullptr;        // packed activations: n rows of groups * 16 * PackedXPerLane floats
  int64_t n = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  int rows_per_launch_group = 1;    // activation rows per thread: 1, 2, 4 or 8
};

// Packs x ([n, cols], row stride ldx, device memory) into `xp` in the lane-major order of
// `format`, zero past cols.
int LaunchPackActivations(Format format, const float* x, int64_t n, int64_t ldx, int64_t cols, float* xp,
                          void* stream);
// y[i, r] for every row r and activation row i < n. Returns a cudaError_t value (0 = launched).
int LaunchExactMatMul(const ExactMatMulLaunch& a, void* stream);

}  // namespace flashserve::kernels::cuda::internal
