// The routed and shared experts' gated activation, act = weight * silu(min(g, L)) * clamp(u, -L,
// L) (no clamps where L <= 0), vectorised, and the exponential it uses. ExpF is this room's own
// e^x (glibc 2.28+'s expf algorithm: a 32-entry table of 2^(i/32) and a cubic, in double): the
// same bits on every ISA and machine, whatever the system's libm. Pure functions, any thread.
#pragma once

#include <cstdint>

namespace flashserve::kernels {

// e^x, correctly rounded in all but rare cases (error below 0.502 ulp); +inf above 88.72, 0
// below -103.97, the smallest subnormal in between -103.97 and -103.28, NaN for NaN.
float ExpF(float x);

// out[i] = weight * (g / (1 + ExpF(-g)) * u) with g = min(gate[i], limit), u = clamp(up[i],
// -limit, limit) where limit > 0 (else g = gate[i], u = up[i]); float operations in that order,
// so every ISA gives the scalar loop's bits. out may alias gate or up.
void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float weight, float* out);

namespace internal {
// The vector loops behind SwiGlu, all n values (only callable where IsaSupported of their ISA).
void SwiGluAvx512(const float* gate, const float* up, int64_t n, float limit, float weight, float* out);
void SwiGluAvx2(const float* gate, const float* up, int64_t n, float limit, float weight, float* out);
}  // namespace internal

}  // namespace flashserve::kernels
