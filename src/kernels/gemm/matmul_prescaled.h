// FP8 with the tile factors moved onto the activations (MatMulArgs::fp8_prescale), templates on
// ISA traits V, included by gemm/matmul_panels.h. Each thread checks once per call that every
// product x * 2^(s - b) of an activation and a scale byte s in the matrix's range is exact (a
// normal float or zero); if so, for each band of weight rows sharing one row of scale tiles it
// multiplies the activation rows by the band's factors once, into scratch, and the band's
// weights decode without any multiply (measured on Zen 4, one core, FP8 256 x 1024 in L2: a
// larger share of the FMA peak at n = 4, 8 and 16). An exact
// x * 2^(s - b) times the weight decoded as e4m3 * 2^(b - 127) is the very product
// x * (e4m3 * 2^(s - 127)) that scaling the weights feeds the FMA, so the bits are the same.
// Where a product would not be exact, the weights are scaled. Re-entrant; scratch is the caller's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/gemm/matmul_simd.h"

namespace flashserve::kernels::internal::gemm {

enum PrescaleMode : int { kScaleWeights, kPrescaleF16, kPrescaleLow };

// How this call scales: the smallest nonzero and the largest |x| (NaN left out, infinity kept)
// against the scale range, as the dispatcher checks fp8_scale_x (b = 7: DecodeFp8Low, 119: f16).
template <class V>
PrescaleMode ChoosePrescale(const MatMulArgs& a) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F lo = V::Set1(std::numeric_limits<float>::infinity()), hi = V::Zero();
  float lo_tail = std::numeric_limits<float>::infinity(), hi_tail = 0.0f;
  for (int64_t i = 0; i < a.n; ++i) {
    const float* x = a.x + i * a.ldx;
    int64_t c = 0;
    for (; c + L <= a.cols; c += L) V::Magnitudes(V::Load(x + c), lo, hi);
    for (; c < a.cols; ++c) {
      const float m = std::fabs(x[c]);
      if (m > 0.0f) lo_tail = std::min(lo_tail, m);
      hi_tail = std::max(m, hi_tail);  // NaN compares false and is kept out
    }
  }
  const double m_lo = std::min(V::MinLanes(lo), lo_tail), m_hi = std::max(V::MaxLanes(hi), hi_tail);
  auto exact = [&](int bias) {
    return m_hi == 0.0 || (std::ldexp(m_lo, a.fp8_scale_lo - bias) >= 0x1p-126 &&
                           std::ldexp(m_hi, a.fp8_scale_hi - bias) < 0x1p127);
  };
  return a.fp8_low && exact(7) ? kPrescaleLow : exact(119) ? kPrescaleF16 : kScaleWeights;
}

// out[i, c] = x[i, c] * fold[scale byte of column c's tile] for the n activation rows (stride
// cols in out); exact where ChoosePrescale said so.
template <class V>
void ScaleActivations(const MatMulArgs& a, const uint8_t* scales, const float* fold, float* out) {
  constexpr int L = V::kLanes;
  const int64_t tile = int64_t{1} << a.tile_shift;
  for (int64_t i = 0; i < a.n; ++i) {
    const float* x = a.x + i * a.ldx;
    float* dst = out + i * a.cols;
    for (int64_t c0 = 0; c0 < a.cols; c0 += tile) {
      const float factor = fold[scales[c0 >> a.tile_shift]];
      const int64_t c1 = std::min(a.cols, c0 + tile);
      int64_t c = c0;
      for (; c + L <= c1; c += L) V::Store(dst + c, V::Mul(V::Load(x + c), V::Set1(factor)));
      for (; c < c1; ++c) dst[c] = x[c] * factor;  // the last tile's tail (tiles hold whole vectors)
    }
  }
}

// The row kernel for fp8_prescale: weight rows [r0, r1), band by band. A band's scaled
// activations stay in scratch for the thread's next rows of the same call.
template <class V>
void PrescaledRows(const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  auto* state = reinterpret_cast<PrescaleState*>(scratch);
  if (state->mode < 0) state->mode = ChoosePrescale<V>(a);
  if (state->mode == kScaleWeights) {
    Rows<V>(Fp8Rows<V, Fp8Scale::kWeights, false>{&a}, a, r0, r1);
    return;
  }
  const bool low = state->mode == kPrescaleLow;
  MatMulArgs scaled = a;  // the same call on the scaled activations
  scaled.x = scratch + kPrescaleHeadFloats;
  scaled.ldx = a.cols;
  for (int64_t b0 = r0; b0 < r1;) {
    const int64_t band = b0 / a.tile_rows, b1 = std::min(r1, (band + 1) * a.tile_rows);
    if (state->band != band) {
      const float* fold = low ? a.fp8_fold_low : a.fp8_fold;
      ScaleActivations<V>(a, a.scale + band * a.scale_cols, fold, scratch + kPrescaleHeadFloats);
      state->band = band;
    }
    if (low) {
      Rows<V>(Fp8Rows<V, Fp8Scale::kPrescaled, true>{&scaled}, scaled, b0, b1);
    } else {
      Rows<V>(Fp8Rows<V, Fp8Scale::kPrescaled, false>{&scaled}, scaled, b0, b1);
    }
    b0 = b1;
  }
}

}  // namespace flashserve::kernels::internal::gemm
