// The device's ceilings, measured (benchmarks print figures against them): the rate at which
// a kernel streams a buffer from device memory, the device-to-device copy rate, and the f32
// FMA rate of CUDA cores. Each takes tens of milliseconds; best of several runs.
#pragma once

#include <cstdint>
#include <string>

namespace flashserve::kernels::cuda {

struct DeviceCeilings {
  double read_bytes_per_s = 0;  // a read-only stream of `bytes` (16-byte loads, all SMs)
  double copy_bytes_per_s = 0;  // cudaMemcpy device to device, bytes read + written
  double fma_per_s = 0;         // independent f32 FMA chains on every SM
};

// Zeroes and an error message in *error where the device or the allocation fails.
DeviceCeilings MeasureDeviceCeilings(int64_t bytes, std::string* error);

}  // namespace flashserve::kernels::cuda
