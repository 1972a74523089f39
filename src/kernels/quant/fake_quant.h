// Quantization-aware-training emulation (v4-architecture.md section 3.3): in-place round trips
// of float vectors through FP8 e4m3 / FP4 e2m1 with power-of-two (ue8m0) or e4m3 block scales, and the
// normalised Walsh-Hadamard transform. Pure functions on caller-owned buffers; any thread.
#pragma once

#include <cstdint>

#include "kernels/simd/isa.h"

namespace flashserve::kernels {

// Per block of `block` values: scale = 2^ceil(log2(max(amax, 1e-4) / 448)),
// x = e4m3(clamp(x / scale, +-448)) * scale. The last block may be shorter.
void FakeQuantFp8(float* x, int64_t n, int block);
// FakeQuantFp8 with a chosen, supported instruction set (AVX-512 vectorised; others scalar).
void FakeQuantFp8WithIsa(Isa isa, float* x, int64_t n, int block);
// The same through the scalar e4m3 encode/decode (tests check the two agree bit for bit).
void FakeQuantFp8Reference(float* x, int64_t n, int block);

// Per block: scale = 2^ceil(log2(max(amax, 6 * 2^-126) / 6)), x = e2m1(clamp(x / scale, +-6)) * scale.
void FakeQuantFp4(float* x, int64_t n, int block);
// FakeQuantFp4 with a chosen, supported instruction set (AVX-512 vectorised, bit-identical;
// others: the scalar encoder).
void FakeQuantFp4WithIsa(Isa isa, float* x, int64_t n, int block);

// V4.1 compressed KV (NVFP4-like, no global scale): per block,
// scale = e4m3(max(amax, 6 * 2^-9) / 6), x = e2m1(clamp(x / scale, +-6)) * scale.
void FakeQuantFp4E4m3(float* x, int64_t n, int block);

// In-place normalised Walsh-Hadamard transform (scale 1/sqrt(n)); n must be a power of two.
void HadamardTransform(float* x, int n);

}  // namespace flashserve::kernels
