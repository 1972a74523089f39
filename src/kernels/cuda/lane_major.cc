// Host packing of the lane-major layout (lane_major.h).
#include "kernels/cuda/lane_major.h"

#include <cstring>

#include "kernels/cuda/exact_matmul_kernels.h"

namespace flashserve::kernels::cuda::internal {

int BlocksPerGroup(Format f) {
  switch (f) {
    case Format::kF32: return 4;
    case Format::kBF16:
    case Format::kF16: return 8;
    default: return 16;
  }
}
int ColumnsPerBlock(Format f) { return f == Format::kFp4 ? 32 : 16; }
int64_t GroupsPerRow(Format f, int64_t cols) {
  const int64_t per_group = static_cast<int64_t>(BlocksPerGroup(f)) * ColumnsPerBlock(f);
  return (cols + per_group - 1) / per_group;
}
int64_t ScaleStride(Format f, int64_t groups, int tile_cols) {
  const int64_t bytes = f == Format::kFp4 ? groups * 16 : (groups * BlocksPerGroup(f) * 16 + tile_cols - 1) / tile_cols;
  return (bytes + 15) / 16 * 16;
}
int PackedXPerLane(Format f) { return BlocksPerGroup(f) * ColumnsPerBlock(f) / kLanes; }

namespace {

// Bytes of one element of a lane (FP4: one byte = two columns).
int ElementBytes(model::MatrixFormat f) {
  switch (f) {
    case model::MatrixFormat::kF32: return 4;
    case model::MatrixFormat::kBF16:
    case model::MatrixFormat::kF16: return 2;
    default: return 1;
  }
}

}  // namespace

void PackRowLaneMajor(const model::Matrix& w, int64_t r, uint8_t* out) {
  const Format f = static_cast<Format>(w.format);
  const int e = ElementBytes(w.format), per_group = BlocksPerGroup(f);
  const int64_t groups = GroupsPerRow(f, w.cols);
  const int64_t row_bytes = w.RowBytes();
  const uint8_t* src = w.data + r * row_bytes;
  for (int64_t g = 0; g < groups; ++g)
    for (int lane = 0; lane < kLanes; ++lane)
      for (int k = 0; k < per_group; ++k) {
        // Element (block g * per_group + k, lane): the lane's column of the block, or (FP4)
        // the block's byte number `lane`, holding columns 32 b + 2 lane and + 1.
        const int64_t offset = ((g * per_group + k) * kLanes + lane) * e;
        uint8_t* dst = out + g * kGroupBytes + lane * 16 + k * e;
        if (offset + e <= row_bytes) {
          std::memcpy(dst, src + offset, e);
        } else {
          std::memset(dst, 0, e);
        }
      }
}

}  // namespace flashserve::kernels::cuda::internal
