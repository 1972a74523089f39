// FP8 panels (rows dequantized once into scratch, then multiplied by every activation row) and
// RunRows, the per-format entry of the vector matrix product (FP8 modes: see MatMulArgs), as
// templates on ISA traits V; included by matmul_avx2.cc / matmul_avx512.cc. Re-entrant; the
// scratch is the caller's.
#pragma once

#include <cstdint>

#include "kernels/gemm/matmul_prescaled.h"
#include "kernels/gemm/matmul_simd.h"

namespace flashserve::kernels::internal::gemm {

// Dequantizes rows [r0, r1) into panel (stride ld, zero-padded) with the same decoders.
template <class V, class Src>
void FillPanel(const Src& src, int64_t r0, int64_t r1, int64_t cols, int64_t ld, float* panel) {
  using F = typename V::F;
  constexpr int L = V::kLanes, kVecs = Src::kStep / L;
  const int64_t full = cols - cols % Src::kStep;
  for (int64_t r = r0; r < r1; ++r) {
    const typename Src::Cursor row = src.Row(r);
    float* dst = panel + (r - r0) * ld;
    F w[kVecs];
    int64_t k = 0;
    for (; k < full; k += Src::kStep) {
      row.Load(k, w);
      for (int v = 0; v < kVecs; ++v) V::Store(dst + k + v * L, w[v]);
    }
    if (k < cols) {
      row.Tail(k, static_cast<int>(cols - k), w);
      V::Store(dst + k, w[0]);
    }
  }
}

// FP8 with tiles the vector decoder does not take: exact products through the scalar tables.
template <class V>
void FillPanelFp8Scalar(const MatMulArgs& a, int64_t r0, int64_t r1, float* panel) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* q = a.data + r * a.cols;
    const uint8_t* s = a.scale + (r / a.tile_rows) * a.scale_cols;
    float* dst = panel + (r - r0) * a.padded_cols;
    for (int64_t c = 0; c < a.cols; ++c) dst[c] = a.e4m3[q[c]] * a.e8m0[s[c / a.tile_cols]];
    for (int64_t c = a.cols; c < a.padded_cols; ++c) dst[c] = 0.0f;
  }
}

template <class V, class Src>
void PanelRowsPass(const Src& src, const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  for (int64_t p0 = r0; p0 < r1; p0 += a.panel_rows) {
    const int64_t p1 = r1 - p0 < a.panel_rows ? r1 : p0 + a.panel_rows;
    // The next panel's weights (past r1: most likely the next task's) stream in from memory
    // while this one is multiplied, a share per register tile (one burst of prefetches before
    // the panel stalled once the miss queue was full).
    const PrefetchSpan next{reinterpret_cast<uintptr_t>(src.RowStart(p1)),
                            reinterpret_cast<uintptr_t>(src.RowStart(p1 + a.panel_rows))};
    if (a.format == model::MatrixFormat::kFp8 && !a.fp8_vector) {
      FillPanelFp8Scalar<V>(a, p0, p1, scratch);
    } else {
      FillPanel<V>(src, p0, p1, a.cols, a.padded_cols, scratch);
    }
    Rows<V>(PanelRows<V>{scratch, a.padded_cols, p0}, a, p0, p1, next);
  }
}

// The row kernel behind MatMulRowsAvx2 / MatMulRowsAvx512 (see matmul_internal.h).
template <class V>
void RunRows(const MatMulArgs& a, int64_t r0, int64_t r1, float* scratch) {
  switch (a.format) {
    case model::MatrixFormat::kF32: Rows<V>(F32Rows<V>{&a}, a, r0, r1); return;
    case model::MatrixFormat::kBF16: Rows<V>(Half16Rows<V, true>{&a}, a, r0, r1); return;
    case model::MatrixFormat::kF16: Rows<V>(Half16Rows<V, false>{&a}, a, r0, r1); return;
    case model::MatrixFormat::kFp4:
      if constexpr (requires(const uint8_t* p, const float* lut, typename V::F* w) { V::DecodeFp4LanePairs(p, lut, w); }) {
        if (a.fp4_lane_pairs) return Rows<V>(Fp4Rows<V, true>{&a}, a, r0, r1);
      }
      Rows<V>(Fp4Rows<V>{&a}, a, r0, r1);  // the dispatcher sends lane pairs to AVX-512 only
      return;
    case model::MatrixFormat::kFp8:
      if (a.fp8_prescale) {
        PrescaledRows<V>(a, r0, r1, scratch);
      } else if (a.fp8_scale_x && a.fp8_low) {
        Rows<V>(Fp8Rows<V, Fp8Scale::kActivations, true>{&a}, a, r0, r1);
      } else if (a.fp8_scale_x) {
        Rows<V>(Fp8Rows<V, Fp8Scale::kActivations, false>{&a}, a, r0, r1);
      } else if (a.direct) {
        Rows<V>(Fp8Rows<V, Fp8Scale::kWeights, false>{&a}, a, r0, r1);
      } else {
        PanelRowsPass<V>(Fp8Rows<V, Fp8Scale::kWeights, false>{&a}, a, r0, r1, scratch);
      }
      return;
  }
}

}  // namespace flashserve::kernels::internal::gemm
