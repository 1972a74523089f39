// Host packing of the lane-major layout (lane_major.h).
#include "kernels/cuda/lane_major.h"

#include <cstring>

#include "kernels/cuda/exact_matmul_kernels.h"

namespace flashserve::kernels::cuda::internal {

void PackRowLaneMajor(const model::Matrix& w, int64_t r, uint8_t* out) {
  const Format f = static_cast<Format>(w.format);
  // Bytes of a lane's element (FP4: one byte, two columns): its 16 bytes per group over the blocks.
  const int per_group = BlocksPerGroup(f), e = 16 / per_group;
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
