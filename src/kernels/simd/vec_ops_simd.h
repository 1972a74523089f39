// The vector primitives of simd/vec_ops.h written once against an ISA traits type V
// (simd/avx2.h, simd/avx512.h) and instantiated by vec_ops_avx2.cc / vec_ops_avx512.cc.
// Include only from translation units built for V's instruction set.
#pragma once

#include <cstdint>

#include "kernels/simd/vec_ops.h"

namespace flashserve::kernels::simd {

template <class V>
typename V::F LoadN(const float* p, int count) {
  return count == V::kLanes ? V::Load(p) : V::LoadPartial(p, count);
}

// NA x NB dot products, one accumulator each: out[i * ldo + j] = dot(a[i], b[j]).
template <class V, int NA, int NB>
void DotBlock(const float* const* a, const float* const* b, int64_t n, float* out, int ldo) {
  using F = typename V::F;
  F acc[NA][NB];
  for (int i = 0; i < NA; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = V::Zero();
  for (int64_t k = 0; k < n; k += V::kLanes) {
    const int count = n - k < V::kLanes ? static_cast<int>(n - k) : V::kLanes;
    F bv[NB];
    for (int j = 0; j < NB; ++j) bv[j] = LoadN<V>(b[j] + k, count);
    for (int i = 0; i < NA; ++i) {
      F av = LoadN<V>(a[i] + k, count);
      V::KeepInRegister(av);
      for (int j = 0; j < NB; ++j) acc[i][j] = V::Fma(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < NA; ++i)
    for (int j = 0; j < NB; ++j) out[i * ldo + j] = V::Sum(acc[i][j]);
}

template <class V, int NA>
void DotRowBlock(const float* const* a, const float* const* b, int num_b, int64_t n, float* out) {
  int j = 0;
  for (; j + 2 <= num_b; j += 2) DotBlock<V, NA, 2>(a, b + j, n, out + j, num_b);
  if (j < num_b) DotBlock<V, NA, 1>(a, b + j, n, out + j, num_b);
}

// Blocks of 4 x 2 dot products: 8 independent accumulators hide the FMA latency.
template <class V>
void Dots(const float* const* a, int num_a, const float* const* b, int num_b, int64_t n, float* out) {
  int i = 0;
  for (; i + 4 <= num_a; i += 4) DotRowBlock<V, 4>(a + i, b, num_b, n, out + i * num_b);
  switch (num_a - i) {
    case 3: DotRowBlock<V, 3>(a + i, b, num_b, n, out + i * num_b); break;
    case 2: DotRowBlock<V, 2>(a + i, b, num_b, n, out + i * num_b); break;
    case 1: DotRowBlock<V, 1>(a + i, b, num_b, n, out + i * num_b); break;
    default: break;
  }
}

template <class V>
float Dot(const float* a, const float* b, int64_t n) {
  float out;
  DotBlock<V, 1, 1>(&a, &b, n, &out, 1);
  return out;
}

// Four accumulators (vector v -> acc[v % 4]), added as (a0 + a1) + (a2 + a3), then V::Sum:
// four FMA chains instead of one, for a norm over a single long vector.
template <class V>
float SumSquares(const float* x, int64_t n) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F acc[4] = {V::Zero(), V::Zero(), V::Zero(), V::Zero()};
  int64_t k = 0;
  for (; k + 4 * L <= n; k += 4 * L)
    for (int a = 0; a < 4; ++a) {
      const F v = V::Load(x + k + a * L);
      acc[a] = V::Fma(v, v, acc[a]);
    }
  for (int a = 0; k < n; k += L, ++a) {
    const F v = LoadN<V>(x + k, n - k < L ? static_cast<int>(n - k) : L);
    acc[a] = V::Fma(v, v, acc[a]);
  }
  return V::Sum(V::Add(V::Add(acc[0], acc[1]), V::Add(acc[2], acc[3])));
}

// NO outputs x NC vectors of columns [c0, c0 + NC * kLanes) (count < kLanes: one partial vector).
template <class V, int NO, int NC>
void WeightedBlock(const float* const* rows, int num_rows, const float* const* weights, int64_t c0, int count,
                   float* const* out) {
  using F = typename V::F;
  F acc[NO][NC];
  for (int o = 0; o < NO; ++o)
    for (int c = 0; c < NC; ++c) acc[o][c] = V::Zero();
  for (int j = 0; j < num_rows; ++j) {
    F rv[NC];
    for (int c = 0; c < NC; ++c) rv[c] = LoadN<V>(rows[j] + c0 + c * V::kLanes, count);
    for (int o = 0; o < NO; ++o) {
      const F p = V::Set1(weights[o][j]);
      for (int c = 0; c < NC; ++c) acc[o][c] = V::Fma(p, rv[c], acc[o][c]);
    }
  }
  for (int o = 0; o < NO; ++o)
    for (int c = 0; c < NC; ++c) {
      if (count == V::kLanes) {
        V::Store(out[o] + c0 + c * V::kLanes, acc[o][c]);
      } else {
        V::StorePartial(out[o] + c0 + c * V::kLanes, acc[o][c], count);
      }
    }
}

template <class V, int NO>
void WeightedColumns(const float* const* rows, int num_rows, const float* const* weights, int64_t n,
                     float* const* out) {
  constexpr int L = V::kLanes;
  int64_t c = 0;
  for (; c + 4 * L <= n; c += 4 * L) WeightedBlock<V, NO, 4>(rows, num_rows, weights, c, L, out);
  for (; c + L <= n; c += L) WeightedBlock<V, NO, 1>(rows, num_rows, weights, c, L, out);
  if (c < n) WeightedBlock<V, NO, 1>(rows, num_rows, weights, c, static_cast<int>(n - c), out);
}

// Blocks of up to 4 outputs x 4 vectors: each row vector is loaded once for 4 outputs.
template <class V>
void WeightedSum(const float* const* rows, int num_rows, const float* const* weights, int num_out, int64_t n,
                 float* const* out) {
  int o = 0;
  for (; o + 4 <= num_out; o += 4) WeightedColumns<V, 4>(rows, num_rows, weights + o, n, out + o);
  switch (num_out - o) {
    case 3: WeightedColumns<V, 3>(rows, num_rows, weights + o, n, out + o); break;
    case 2: WeightedColumns<V, 2>(rows, num_rows, weights + o, n, out + o); break;
    case 1: WeightedColumns<V, 1>(rows, num_rows, weights + o, n, out + o); break;
    default: break;
  }
}

template <class V>
void Scale(const float* x, const float* w, float s, int64_t n, float* out) {
  const typename V::F sv = V::Set1(s);
  for (int64_t i = 0; i < n; i += V::kLanes) {
    const int count = n - i < V::kLanes ? static_cast<int>(n - i) : V::kLanes;
    typename V::F v = V::Mul(LoadN<V>(x + i, count), sv);
    if (w != nullptr) v = V::Mul(LoadN<V>(w + i, count), v);
    if (count == V::kLanes) {
      V::Store(out + i, v);
    } else {
      V::StorePartial(out + i, v, count);
    }
  }
}

template <class V>
float SumAny(const float* x, int64_t n) {
  using F = typename V::F;
  F a0 = V::Zero(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i < n; i += 4 * V::kLanes) {
    a0 = V::Add(a0, V::Load(x + i));
    a1 = V::Add(a1, V::Load(x + i + V::kLanes));
    a2 = V::Add(a2, V::Load(x + i + 2 * V::kLanes));
    a3 = V::Add(a3, V::Load(x + i + 3 * V::kLanes));
  }
  return V::Sum(V::Add(V::Add(a0, a1), V::Add(a2, a3)));
}

// VecOps::mix_streams: a vector of columns at a time, the portable loop for the last ones.
template <class V>
void MixStreams(float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb, const float* y) {
  using F = typename V::F;
  int64_t c = 0;
  for (; c + V::kLanes <= n; c += V::kLanes) {
    F old[kMaxStreams];
    for (int i = 0; i < hc; ++i) old[i] = V::Load(x + i * stride + c);
    const F yv = V::Load(y + c);
    for (int j = 0; j < hc; ++j) {
      F acc = V::Mul(V::Set1(post[j]), yv);
      for (int i = 0; i < hc; ++i) acc = V::Add(acc, V::Mul(V::Set1(comb[i * hc + j]), old[i]));
      V::Store(x + j * stride + c, acc);
    }
  }
  MixStreamsPortable(x + c, hc, n - c, stride, post, comb, y + c);
}

// VecOps::collapse, likewise.
template <class V>
void Collapse(const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out) {
  using F = typename V::F;
  int64_t c = 0;
  for (; c + V::kLanes <= n; c += V::kLanes) {
    F acc = V::Mul(V::Set1(w[0]), V::Load(x + c));
    for (int i = 1; i < hc; ++i) acc = V::Add(acc, V::Mul(V::Set1(w[i]), V::Load(x + i * stride + c)));
    V::Store(out + c, acc);
  }
  CollapsePortable(x + c, hc, n - c, stride, w, out + c);
}

template <class V>
float FmaLoop(int64_t iterations) {
  constexpr int kAcc = 12;
  typename V::F acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = V::Set1(0.001f * static_cast<float>(j));
  const typename V::F a = V::Set1(0.999999f), b = V::Set1(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int j = 0; j < kAcc; ++j) acc[j] = V::Fma(acc[j], a, b);
  typename V::F sum = acc[0];
  for (int j = 1; j < kAcc; ++j) sum = V::Add(sum, acc[j]);
  return V::Sum(sum);
}

template <class V>
const VecOps& MakeVecOps() {
  static const VecOps ops{V::kLanes, &Dot<V>,    &SumSquares<V>, &Dots<V>,     &WeightedSum<V>,
                          &Scale<V>,  &SumAny<V>, &MixStreams<V>, &Collapse<V>, &FmaLoop<V>};
  return ops;
}

}  // namespace flashserve::kernels::simd
