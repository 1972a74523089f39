// The AMX half of the roofline probes (kernels/roofline.h): a loop of TDPBF16PS on register
// tiles. Compiled with AMX flags; called only where AmxSupported().
#include <immintrin.h>

#include <cstdint>

#include "kernels/roofline.h"

namespace flashserve::kernels::internal {

double TileDotLoop(int64_t iterations) {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  alignas(64) static const uint16_t kOnes[512] = {};  // zero operands: the rate does not depend on values
  _tile_loadconfig(&config);
  _tile_loadd(0, kOnes, 64);
  _tile_loadd(1, kOnes, 64);
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
