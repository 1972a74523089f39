// RMSNorm and interleaved ("GPT-J") rotary embeddings with optional YaRN frequency
// interpolation (v4-architecture.md sections 3.1-3.2). RopeTable is immutable after
// construction and shared by threads; the functions work on caller-owned buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/simd/isa.h"

namespace flashserve::kernels {

// out = w * x / sqrt(mean(x^2) + eps); w may be null (unweighted). out may alias x.
// Sum of squares in the fixed order of simd/vec_ops.h (independent of batch composition).
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out);
// RmsNorm with a chosen, supported instruction set (tests and benchmarks).
void RmsNormWithIsa(Isa isa, const float* x, const float* w, int64_t n, float eps, float* out);
void RmsNormReference(const float* x, const float* w, int64_t n, float eps, float* out);
// 1 / sqrt(mean(x^2) + eps) with the same summation order as RmsNorm (reference: fp64).
float InverseRms(const float* x, int64_t n, float eps);
float InverseRmsReference(const float* x, int64_t n, float eps);

struct YarnScaling {
  double factor = 1.0;
  int64_t original_max_position = 0;  // 0 disables YaRN
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

class RopeTable {
 public:
  // rope_dim channels rotate as rope_dim/2 interleaved pairs with f_i = theta^(-2i/rope_dim).
  RopeTable(int rope_dim, double theta, const YarnScaling& yarn);
  int rope_dim() const { return rope_dim_; }
  const std::vector<double>& frequencies() const { return freqs_; }
  // cos/sin of pos * f_i for each pair (rope_dim/2 values each).
  void Angles(int64_t pos, float* cos_out, float* sin_out) const;

 private:
  int rope_dim_;
  std::vector<double> freqs_;
};

// Rotates x[0..2*num_pairs) in place: pair (x[2i], x[2i+1]) by angle i (by -angle if inverse).
void ApplyRope(float* x, int num_pairs, const float* cos, const float* sin, bool inverse);

}  // namespace flashserve::kernels
