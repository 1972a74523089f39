// The AMX half of the roofline probes (kernels/roofline.h): a loop of TDPBF16PS on register
// tiles, configured as the matrix products configure them (gemm/matmul_amx_tiles.h). Compiled
// with AMX flags; called by MeasureAmxPeak on pool threads, only where AmxSupported(); no state.
#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm/matmul_amx_tiles.h"
#include "kernels/roofline.h"

namespace flashserve::kernels::internal {

double TileDotLoop(int64_t iterations) {
  alignas(64) static const uint16_t kZeros[512] = {};  // zero operands: the rate does not depend on values
  ConfigureTiles(kBlock, /*split=*/false);  // every tile 16 rows of 64 bytes
  _tile_loadd(0, kZeros, 64);
  _tile_loadd(1, kZeros, 64);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t i = 0; i < iterations; ++i) {  // four independent accumulators
    _tile_dpbf16ps(4, 0, 1);
    _tile_dpbf16ps(5, 0, 1);
    _tile_dpbf16ps(6, 0, 1);
    _tile_dpbf16ps(7, 0, 1);
  }
  alignas(64) float out[256];
  _tile_stored(4, out, 64);
  _tile_release();
  return 4.0 * static_cast<double>(iterations) * kTileDotFlops + out[0];  // out[0] == 0: keeps the loop
}

}  // namespace flashserve::kernels::internal
