// Vector primitives of the CPU kernels (attention, RMSNorm, the mHC streams, the roofline probe), one
// implementation per instruction set (kernels/simd/isa.h). Internal to the room; pure functions,
// callable from any thread.

// Every dot product has one fixed order for a given ISA and length, whatever else is computed
// in the same call: one accumulator of `lanes` floats takes the input's vectors (the last one
// zero-padded) in ascending order with FMA, then a fixed halving tree (the MatMul order). The
// generic build: 16 partial sums, multiply then add.
#pragma once

#include <cstdint>

#include "kernels/simd/isa.h"

namespace flashserve::kernels::simd {

inline constexpr int kMaxStreams = 16;

struct VecOps {
  int lanes;  // floats per vector (generic: 1)
  float (*dot)(const float* a, const float* b, int64_t n);  // sum of a[i] * b[i]
  // Sum of x[i]^2 with four accumulators: vector v goes to accumulator v % 4, then
  // (a0 + a1) + (a2 + a3) and the halving tree (generic: dot(x, x, n)).
  float (*sum_squares)(const float* x, int64_t n);
  // out[i * num_b + j] = dot(a[i], b[j], n), each in exactly dot's order.
  void (*dots)(const float* const* a, int num_a, const float* const* b, int num_b, int64_t n, float* out);
  // out[o][c] = sum over j in ascending order of weights[o][j] * rows[j][c], one FMA per row
  // (generic: multiply then add) starting from zero; c in [0, n).
  void (*weighted_sum)(const float* const* rows, int num_rows, const float* const* weights, int num_out, int64_t n,
                       float* const* out);
  // out[i] = w[i] * (x[i] * s), or x[i] * s without w; out may alias x.
  void (*scale)(const float* x, const float* w, float s, int64_t n, float* out);
  float (*sum)(const float* x, int64_t n);  // any order; n a multiple of 64 (bandwidth probe)
  // Streams x_i = x + i * stride (i < hc <= kMaxStreams), columns [0, n), in place:
  // x_j[c] <- post[j] * y[c] + comb[i * hc + j] * x_i[c] added for i ascending, each a multiply
  // then an add (no FMA: every ISA gives the generic build's bits).
  void (*mix_streams)(float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb,
                      const float* y);
  // out[c] = w[0] * x_0[c] + w[i] * x_i[c] added for i = 1 .. hc - 1 ascending (multiply, then
  // add), x_i = x + i * stride.
  void (*collapse)(const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out);
  // iterations rounds of 12 independent FMAs (generic: multiply + add) on registers; the
  // result depends on all of them (FMA probe: 2 * 12 * lanes flops per round).
  float (*fma_loop)(int64_t iterations);
};

// The portable mix_streams and collapse (the generic table's), which the vector ones call for
// their last columns.
void MixStreamsPortable(float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb,
                        const float* y);
void CollapsePortable(const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out);

// The primitives for isa, which must be supported (IsaSupported).
const VecOps& GetVecOps(Isa isa);

// Defined in the translation units built for each ISA.
const VecOps& VecOpsAvx512();
const VecOps& VecOpsAvx2();

}  // namespace flashserve::kernels::simd
