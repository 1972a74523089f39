// Weight-row sources of the vector matrix product: per format, a cursor that decodes a row
// into vectors of the ISA traits type V, exactly (every weight is code times scale, unrounded).
// Templates on V only, included by gemm/matmul_simd.h. Re-entrant; no state.

// Source interface: kStep (columns per Load, a multiple of V::kLanes), kStepBytes (weight
// bytes per Load, 0 = no prefetch), kScalesX (Tile multiplies activations by XScale),
// kDecodeCost (0: loads and shifts, 1: a lookup or conversion, 2: conversion and scaling, or
// any source measured faster in passes of kWideMr rows; the costlier, the more activation rows
// should share a decoded vector), Row(r)
// returning a Cursor with Load(k, w) for columns [k, k + kStep) and Tail(k, rem, w) for the
// last rem < kStep columns, zero-padded; RowStart(r) for prefetching (rows past the end
// give the end of the matrix).
#pragma once

#include <cstdint>

#include "kernels/gemm/matmul_internal.h"
#include "model/matrix.h"

namespace flashserve::kernels::internal::gemm {

// Row r, or the end of the matrix for rows past it (prefetch addresses stay in bounds).
template <class V>
int64_t ClampRow(int64_t r, const MatMulArgs* a) {
  return r < a->rows ? r : a->rows;
}

// Where FP4 row r's codes and scales start, for rows stored in groups of group_rows
// (model::Fp4Layout::kLanePairs: model::kFp4GroupRows; 1: row-major). The decoders step
// group_rows blocks per block from there (model::Matrix::Fp4BlockOffset, Fp4ScaleIndex). On V,
// like every function here, so that no inline code is shared between ISA-flagged files.
struct Fp4RowStart {
  const uint8_t* q;
  const uint8_t* s;
};
template <class V>
Fp4RowStart Fp4Row(const MatMulArgs& a, int64_t r, int64_t group_rows) {
  const int64_t in_group = r % group_rows, first = r - in_group;
  return {a.data + first * (a.cols / 2) + in_group * 16, a.scale + first * a.scale_cols + in_group};
}

// The first rem values of p, zero-padded to N (row tails). A fixed-count loop, not a copy of
// rem values: that one became a memcpy call, and since a call clobbers every vector register,
// the tiles then kept their accumulators on the stack (spilled and reloaded around the loop).
template <class V, class T, int N>
struct Staged {
  T v[N];
  Staged(const T* p, int rem) {
    for (int i = 0; i < N; ++i) v[i] = i < rem ? p[i] : T{};
  }
};

template <class V>
struct F32Rows {
  using F = typename V::F;
  static constexpr int kStep = V::kLanes;
  struct Cursor {
    const float* p;
    void Load(int64_t k, F* w) const { w[0] = V::Load(p + k); }
    void Tail(int64_t k, int rem, F* w) const { w[0] = V::Load(Staged<V, float, kStep>(p + k, rem).v); }
  };
  static constexpr int kStepBytes = 4 * kStep;
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = 0;
  const MatMulArgs* a;
  Cursor Row(int64_t r) const { return {reinterpret_cast<const float*>(a->data) + r * a->cols}; }
  const uint8_t* RowStart(int64_t r) const { return a->data + ClampRow<V>(r, a) * a->cols * 4; }
  int64_t RowBytes() const { return a->cols * 4; }
};

template <class V, bool kBf16>
struct Half16Rows {
  using F = typename V::F;
  static constexpr int kStep = V::kLanes;
  static F Decode(const uint16_t* p) { return kBf16 ? V::DecodeBf16(p) : V::DecodeF16(p); }
  struct Cursor {
    const uint16_t* p;
    void Load(int64_t k, F* w) const { w[0] = Decode(p + k); }
    void Tail(int64_t k, int rem, F* w) const { w[0] = Decode(Staged<V, uint16_t, kStep>(p + k, rem).v); }
  };
  static constexpr int kStepBytes = 2 * kStep;
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = kBf16 ? 0 : 1;
  const MatMulArgs* a;
  Cursor Row(int64_t r) const { return {reinterpret_cast<const uint16_t*>(a->data) + r * a->cols}; }
  const uint8_t* RowStart(int64_t r) const { return a->data + ClampRow<V>(r, a) * a->cols * 2; }
  int64_t RowBytes() const { return a->cols * 2; }
};

// Where the FP8 tile factor goes: into each decoded weight vector, into each activation vector
// per step (Tile calls XScale), or nowhere (activations scaled ahead, gemm/matmul_prescaled.h).
enum class Fp8Scale { kWeights, kActivations, kPrescaled };

// FP8 e4m3, power-of-two tiles of at least kLanes columns, so one scale per block. Each weight
// decodes to e4m3 * 2^-8 (f16 route) or e4m3 * 2^-120 (kLow, only with scaled activations);
// Fp8Scale::kWeights: times the tile factor (MatMulArgs::fp8_fold). Otherwise the activations
// carry the factor, used only where that product is exact (see MatMulArgs::fp8_scale_x,
// fp8_low, fp8_prescale).
template <class V, Fp8Scale kScale, bool kLow>
struct Fp8Rows {
  using F = typename V::F;
  static constexpr int kStep = V::kLanes;
  static constexpr int kStepBytes = kStep;
  static constexpr bool kScalesX = kScale == Fp8Scale::kActivations;
  // sign extension, shift, mask, conversion, scale (prescaled: no scale; kLow: no conversion)
  static constexpr int kDecodeCost = 2;
  struct Cursor {
    const uint8_t* q;
    const uint8_t* s;
    const float* fold;
    int shift;
    F Decode(const uint8_t* p, int64_t k) const {
      const F h = kLow ? V::DecodeFp8Low(p) : V::DecodeFp8(p);
      return kScale == Fp8Scale::kWeights ? V::Mul(h, V::Set1(fold[s[k >> shift]])) : h;
    }
    void Load(int64_t k, F* w) const { w[0] = Decode(q + k, k); }
    void Tail(int64_t k, int rem, F* w) const { w[0] = Decode(Staged<V, uint8_t, kStep>(q + k, rem).v, k); }
    F XScale(int64_t k) const { return V::Set1(fold[s[k >> shift]]); }
  };
  const MatMulArgs* a;
  Cursor Row(int64_t r) const {
    return {a->data + r * a->cols, a->scale + (r / a->tile_rows) * a->scale_cols, a->fp8_fold, a->tile_shift};
  }
  const uint8_t* RowStart(int64_t r) const { return a->data + ClampRow<V>(r, a) * a->cols; }
  int64_t RowBytes() const { return a->cols; }
};

// FP4 e2m1, one scale per 32 columns; cols is a multiple of 32, so there is no tail. The
// 16-entry table already multiplied by the scale is looked up per scale byte. kLanePairs: the
// data is in model::Fp4Layout::kLanePairs (ISA traits with DecodeFp4LanePairs only), whose rows
// go in groups: a row's block b (32 columns) lies b * 16 * kGroupRows bytes after its first,
// its scale b * kGroupRows after its first (Fp4Row).
template <class V, bool kLanePairs = false>
struct Fp4Rows {
  using F = typename V::F;
  static constexpr int kStep = 2 * V::kLanes;
  static constexpr int kStepBytes = kStep / 2;
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = 1;  // measured on Zen 4: for n > 8, passes of 4 rows beat 8
  // A tile within one group decodes every row from its first row's cursor (gemm::WithinGroup).
  static constexpr int64_t kGroupRows = kLanePairs ? model::kFp4GroupRows : 1;
  struct Cursor {
    const uint8_t* q;
    const uint8_t* s;
    const float* luts;
    // Columns [k, k + kStep) of the row `row` rows after this one (lane pairs: in its group).
    void LoadRow(int64_t k, int row, F* w) const {
      const int64_t block = k >> 5;
      if constexpr (kLanePairs) {
        V::DecodeFp4LanePairs(q + (block * kGroupRows + row) * 16, luts + 16 * s[block * kGroupRows + row], w);
      } else {
        V::DecodeFp4(q + k / 2, luts + 16 * s[block], w);
      }
    }
    void Load(int64_t k, F* w) const { LoadRow(k, 0, w); }
    void Tail(int64_t, int, F* w) const { w[0] = w[1] = V::Zero(); }
  };
  template <int NR, int kVecs>
  static void LoadGroup(const Cursor& first, int64_t k, F (*w)[kVecs]) {
    for (int j = 0; j < NR; ++j) first.LoadRow(k, j, w[j]);
  }
  const MatMulArgs* a;
  Cursor Row(int64_t r) const {
    const Fp4RowStart start = Fp4Row<V>(*a, r, kGroupRows);
    return {start.q, start.s, a->e2m1_scaled};
  }
  // Groups are contiguous, so a tile's bytes start about where a row-major row would.
  const uint8_t* RowStart(int64_t r) const { return a->data + ClampRow<V>(r, a) * (a->cols / 2); }
  int64_t RowBytes() const { return a->cols / 2; }
};

// Rows [row0, ...) already dequantized into a zero-padded panel of stride ld.
template <class V>
struct PanelRows {
  using F = typename V::F;
  static constexpr int kStep = V::kLanes;
  struct Cursor {
    const float* p;
    void Load(int64_t k, F* w) const { w[0] = V::Load(p + k); }
    void Tail(int64_t k, int, F* w) const { w[0] = V::Load(p + k); }
  };
  static constexpr int kStepBytes = 0;  // already in cache: no prefetch
  static constexpr bool kScalesX = false;
  static constexpr int kDecodeCost = 0;
  const float* panel;
  int64_t ld;
  int64_t row0;
  Cursor Row(int64_t r) const { return {panel + (r - row0) * ld}; }
  const uint8_t* RowStart(int64_t) const { return nullptr; }
  int64_t RowBytes() const { return ld * 4; }
};

}  // namespace flashserve::kernels::internal::gemm
