// The CUDA kernels' lane-major weight layout (exact_matmul_kernels.h), packed on the host:
// each row is GroupsPerRow groups of 256 bytes; in group g, lane l's 16 bytes hold its
// elements of the group's consecutive blocks, block by block (a block is 16 columns, lane l's
// element being column 16 b + l; FP4: 32 columns, lane l's element being the block's byte l,
// columns 32 b + 2 l and + 1). Zero past the row. Host code; no device needed.
#pragma once

#include <cstdint>

#include "model/matrix.h"

namespace flashserve::kernels::cuda::internal {

// Row r of w into `out` (GroupsPerRow(format, cols) * kGroupBytes bytes).
void PackRowLaneMajor(const model::Matrix& w, int64_t r, uint8_t* out);

}  // namespace flashserve::kernels::cuda::internal
