// Hyper-connection stream arithmetic (v4-architecture.md sections 4.2 and 4.5): the mix of the
// hc residual streams after a sublayer and their weighted collapse before one, vectorised for
// each ISA with the portable build's bits (per element, products then adds in a fixed order;
// no FMA), so the result is the same on every ISA. Pure functions; any thread. Called by
// engine/mhc.cc.
#pragma once

#include <cstdint>

#include "kernels/simd/isa.h"

namespace flashserve::kernels {

// The streams x_i = x + i * stride (i < hc <= 16, n floats each), in place:
// x_j <- post[j] * y + comb[i * hc + j] * x_i added for i ascending (comb applied transposed).
void MixStreams(float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb, const float* y);
// out = w[0] * x_0 + w[i] * x_i added for i = 1 .. hc - 1 ascending, x_i = x + i * stride.
void CollapseStreams(const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out);

// The same with a chosen, supported instruction set (tests).
void MixStreamsWithIsa(Isa isa, float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb,
                       const float* y);
void CollapseStreamsWithIsa(Isa isa, const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out);

}  // namespace flashserve::kernels
