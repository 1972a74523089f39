// RMSNorm, RoPE tables and rotation (kernels/norm_rope/norm_rope.h).
#include "kernels/norm_rope/norm_rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/simd/vec_ops.h"

namespace flashserve::kernels {

namespace {

float InverseRmsWith(const simd::VecOps& ops, const float* x, int64_t n, float eps) {
  return 1.0f / std::sqrt(ops.sum_squares(x, n) / static_cast<float>(n) + eps);
}

}  // namespace

float InverseRms(const float* x, int64_t n, float eps) {
  return InverseRmsWith(simd::GetVecOps(BestIsa()), x, n, eps);
}

float InverseRmsReference(const float* x, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
}

void RmsNormWithIsa(Isa isa, const float* x, const float* w, int64_t n, float eps, float* out) {
  const simd::VecOps& ops = simd::GetVecOps(isa);
  ops.scale(x, w, InverseRmsWith(ops, x, n, eps), n, out);
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* out) {
  RmsNormWithIsa(BestIsa(), x, w, n, eps, out);
}

void RmsNormReference(const float* x, const float* w, int64_t n, float eps, float* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>((w ? w[j] : 1.0) * (x[j] * inv));
}

RopeTable::RopeTable(int rope_dim, double theta, const YarnScaling& yarn) : rope_dim_(rope_dim) {
  const int half = rope_dim / 2;
  freqs_.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) freqs_[i] = std::pow(theta, -2.0 * i / rope_dim);
  if (yarn.original_max_position <= 0 || yarn.factor == 1.0) return;
  auto correction_dim = [&](double rotations) {
    return rope_dim * std::log(static_cast<double>(yarn.original_max_position) / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(theta));
  };
  double low = std::max(std::floor(correction_dim(yarn.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(yarn.beta_slow)), static_cast<double>(rope_dim - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < half; ++i) {
    double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    // ramp 0 keeps the frequency, ramp 1 divides it by the factor.
    freqs_[i] = freqs_[i] / yarn.factor * ramp + freqs_[i] * (1.0 - ramp);
  }
}

void RopeTable::Angles(int64_t pos, float* cos_out, float* sin_out) const {
  for (size_t i = 0; i < freqs_.size(); ++i) {
    double a = static_cast<double>(pos) * freqs_[i];
    cos_out[i] = static_cast<float>(std::cos(a));
    sin_out[i] = static_cast<float>(std::sin(a));
  }
}

void ApplyRope(float* x, int num_pairs, const float* cos, const float* sin, bool inverse) {
  for (int i = 0; i < num_pairs; ++i) {
    float c = cos[i], s = inverse ? -sin[i] : sin[i];
    float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c - b * s;
    x[2 * i + 1] = a * s + b * c;
  }
}

}  // namespace flashserve::kernels
