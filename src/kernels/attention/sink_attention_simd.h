// Sink attention as templates on ISA traits V (simd/avx2.h, simd/avx512.h), instantiated by
// sink_attention_avx2.cc / sink_attention_avx512.cc with register-tile shapes. Multi-query:
// every head of a position attends to the same keys, which are also the values, so each tile
// loads a key vector once for a block of heads. Re-entrant; the scratch is the caller's.

// Order contract (one per ISA; independent of the head range, the blocking and the thread):
// logit(h, j) = the VecOps::dot order of q_h and key j (one accumulator, vectors ascending,
// the last zero-padded, V::Sum), times scale; m = max(sink_h, logits); e_j = V::Exp(logit - m);
// denominator = V::Sum of lane sums over the vectors of e (ascending, zero-padded), plus
// V::Exp(sink_h - m); out[h][c] = (FMA chain over keys j ascending of e_j * key_j[c] from
// zero) * (1 / denominator).
#pragma once

#include <cstdint>

#include "kernels/simd/tile_sums.h"

namespace flashserve::kernels::attention {

// One SinkAttention call (kernels/attention/sink_attention.h) for heads [head_begin, head_end).
struct AttentionArgs {
  const float* q = nullptr;  // [heads, dim]
  int head_begin = 0;
  int head_end = 0;
  int dim = 0;
  const float* const* keys = nullptr;
  int num_keys = 0;
  const float* sinks = nullptr;
  float scale = 1.0f;
  float* out = nullptr;  // [heads, dim]
  float* weights = nullptr;  // scratch: (head_end - head_begin) * (num_keys + 1) floats
};

// The kernels built for each ISA; only callable where IsaSupported says so.
void AttendAvx512(const AttentionArgs& args);
void AttendAvx2(const AttentionArgs& args);

// Keys per chunk: a chunk's keys (128 KiB at dim 512) stay in L2 while every head block
// reads them.
constexpr int kKeyChunk = 64;

template <class V>
typename V::F LoadN(const float* p, int count) {
  return count == V::kLanes ? V::Load(p) : V::LoadPartial(p, count);
}

template <class V>
void StoreN(float* p, typename V::F v, int count) {
  if (count == V::kLanes) {
    V::Store(p, v);
  } else {
    V::StorePartial(p, v, count);
  }
}

// acc[h][j] += q_h[c..] * key_j[c..] for one vector of columns at c, count lanes of them;
// requests the same columns of the keys `ahead` (NK pointers, or null) into L2.
template <class V, int NH, int NK>
inline void LogitStep(const float* const* qs, const float* const* ks, const float* const* ahead, int c, int count,
                      typename V::F (&acc)[NH][NK]) {
  using F = typename V::F;
  if (ahead != nullptr)
    for (int j = 0; j < NK; ++j) V::Prefetch(reinterpret_cast<uintptr_t>(ahead[j] + c));
  F kv[NK];
  for (int j = 0; j < NK; ++j) kv[j] = LoadN<V>(ks[j] + c, count);
  for (int h = 0; h < NH; ++h) {
    F qv = LoadN<V>(qs[h] + c, count);
    V::KeepInRegister(qv);
    for (int j = 0; j < NK; ++j) acc[h][j] = V::Fma(qv, kv[j], acc[h][j]);
  }
}

// logits[h * ld + j] = dot(q_h, key_j) for NH heads and NK keys: the register tile. ahead: NK
// keys to request meanwhile (a vector's worth of each per step), or null.
template <class V, int NH, int NK>
void LogitTile(const float* const* qs, const float* const* ks, const float* const* ahead, int dim, float* logits,
               int ld) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  F acc[NH][NK];
  for (int h = 0; h < NH; ++h)
    for (int j = 0; j < NK; ++j) acc[h][j] = V::Zero();
  const int full = dim - dim % L;
  for (int c = 0; c < full; c += L) LogitStep<V, NH, NK>(qs, ks, ahead, c, L, acc);
  if (full < dim) LogitStep<V, NH, NK>(qs, ks, nullptr, full, dim - full, acc);
  float* rows[NH];
  for (int h = 0; h < NH; ++h) rows[h] = logits + static_cast<int64_t>(h) * ld;
  simd::StoreSums<V, NH, NK>(acc, rows, 0);  // V::Sum's tree per logit, full tiles all at once
}

// Keys [j0, j1) for NH heads: tiles of NH x V::kLogitKeys keys, then single keys.
template <class V, int NH>
void LogitBlock(const AttentionArgs& a, int h0, int j0, int j1) {
  const float* qs[NH];
  for (int h = 0; h < NH; ++h) qs[h] = a.q + static_cast<int64_t>(a.head_begin + h0 + h) * a.dim;
  float* logits = a.weights + static_cast<int64_t>(h0) * a.num_keys;
  // The first head block streams the keys (rows of per-sequence state, mostly not in cache, each
  // a stream too short for the hardware prefetcher): it requests those two tiles ahead.
  constexpr int NK = V::kLogitKeys, kAhead = 2 * NK;
  const bool stream = h0 == 0;
  int j = j0;
  for (; j + NK <= j1; j += NK)
    LogitTile<V, NH, NK>(qs, a.keys + j, stream && j + kAhead + NK <= a.num_keys ? a.keys + j + kAhead : nullptr,
                         a.dim, logits + j, a.num_keys);
  for (; j < j1; ++j) LogitTile<V, NH, 1>(qs, a.keys + j, nullptr, a.dim, logits + j, a.num_keys);
}

// Turns head h's logits into softmax numerators in place; returns 1 / denominator.
template <class V>
float Softmax(float* row, int n, float scale, float sink) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  const F s = V::Set1(scale);
  F mv = V::Set1(sink);
  for (int j = 0; j < n; j += L) {
    const int count = n - j < L ? n - j : L;
    const F v = V::Mul(LoadN<V>(row + j, count), s);
    StoreN<V>(row + j, v, count);
    mv = V::Max(mv, V::FirstLanes(v, count, sink));  // padding lanes hold the sink: no effect
  }
  const F m = V::Set1(V::MaxLanes(mv));
  F sum = V::Zero();
  for (int j = 0; j < n; j += L) {
    const int count = n - j < L ? n - j : L;
    const F e = V::Exp(V::Sub(LoadN<V>(row + j, count), m));
    StoreN<V>(row + j, e, count);
    sum = V::Add(sum, V::FirstLanes(e, count, 0.0f));
  }
  const float sink_e = V::First(V::Exp(V::Sub(V::Set1(sink), m)));
  return 1.0f / (V::Sum(sum) + sink_e);
}

// out[h][c0 + ...] for NH heads and NC vectors of columns (kCount lanes each; 0: all) over keys
// [j0, j1): accumulators start at zero (first) or from out, and are scaled by inv[h] when the
// chunk is the last one.
template <class V, int NH, int NC>
void ValueTile(const AttentionArgs& a, int h0, int j0, int j1, int c0, int count, bool first, bool last,
               const float* inv) {
  using F = typename V::F;
  constexpr int L = V::kLanes;
  float* outs[NH];
  const float* ws[NH];
  for (int h = 0; h < NH; ++h) {
    outs[h] = a.out + static_cast<int64_t>(a.head_begin + h0 + h) * a.dim + c0;
    ws[h] = a.weights + static_cast<int64_t>(h0 + h) * a.num_keys;
  }
  F acc[NH][NC];
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c) acc[h][c] = first ? V::Zero() : LoadN<V>(outs[h] + c * L, count);
  for (int j = j0; j < j1; ++j) {
    F kv[NC];
    for (int c = 0; c < NC; ++c) kv[c] = LoadN<V>(a.keys[j] + c0 + c * L, count);
    for (int h = 0; h < NH; ++h) {
      const F p = V::Set1(ws[h][j]);
      for (int c = 0; c < NC; ++c) acc[h][c] = V::Fma(p, kv[c], acc[h][c]);
    }
  }
  for (int h = 0; h < NH; ++h)
    for (int c = 0; c < NC; ++c)
      StoreN<V>(outs[h] + c * L, last ? V::Mul(acc[h][c], V::Set1(inv[h])) : acc[h][c], count);
}

// Keys [j0, j1) for NH heads over all columns: blocks of V::kValueVectors full vectors, then
// single vectors, the last one possibly partial.
template <class V, int NH>
void ValueBlock(const AttentionArgs& a, int h0, int j0, int j1, const float* inv) {
  constexpr int L = V::kLanes, NC = V::kValueVectors;
  const bool first = j0 == 0, last = j1 == a.num_keys;
  int c = 0;
  for (; c + NC * L <= a.dim; c += NC * L) ValueTile<V, NH, NC>(a, h0, j0, j1, c, L, first, last, inv + h0);
  for (; c + L <= a.dim; c += L) ValueTile<V, NH, 1>(a, h0, j0, j1, c, L, first, last, inv + h0);
  if (c < a.dim) ValueTile<V, NH, 1>(a, h0, j0, j1, c, a.dim - c, first, last, inv + h0);
}

// Block<V, NH> for the last `left` heads from h (0 < left < NH + 1), one block.
template <class V, template <class, int> class Block, int NH, class... Args>
void RemainderBlock(const AttentionArgs& a, int h, int left, Args... args) {
  if constexpr (NH > 0) {
    if (left == NH) {
      Block<V, NH>::Run(a, h, args...);
    } else {
      RemainderBlock<V, Block, NH - 1>(a, h, left, args...);
    }
  }
}

// Calls Block<V, NH>(a, h0, ...) for every head block of kHeads heads (and the remainder).
template <class V, template <class, int> class Block, class... Args>
void ForHeadBlocks(const AttentionArgs& a, Args... args) {
  constexpr int kHeads = V::kHeadBlock;
  const int heads = a.head_end - a.head_begin;
  int h = 0;
  for (; h + kHeads <= heads; h += kHeads) Block<V, kHeads>::Run(a, h, args...);
  if (h < heads) RemainderBlock<V, Block, kHeads - 1>(a, h, heads - h, args...);
}

template <class V, int NH>
struct Logits {
  static void Run(const AttentionArgs& a, int h0, int j0, int j1) { LogitBlock<V, NH>(a, h0, j0, j1); }
};

template <class V, int NH>
struct Values {
  static void Run(const AttentionArgs& a, int h0, int j0, int j1, const float* inv) {
    ValueBlock<V, NH>(a, h0, j0, j1, inv);
  }
};

// The whole call: logits, softmax, weighted values, key chunk by key chunk.
template <class V>
void Attend(const AttentionArgs& a) {
  const int heads = a.head_end - a.head_begin;
  if (a.num_keys == 0) {  // only the sink: a zero output
    float* out = a.out + static_cast<int64_t>(a.head_begin) * a.dim;
    for (int64_t i = 0; i < static_cast<int64_t>(heads) * a.dim; ++i) out[i] = 0.0f;
    return;
  }
  for (int j0 = 0; j0 < a.num_keys; j0 += kKeyChunk) {
    const int j1 = a.num_keys - j0 < kKeyChunk ? a.num_keys : j0 + kKeyChunk;
    ForHeadBlocks<V, Logits>(a, j0, j1);
  }
  float* inv = a.weights + static_cast<int64_t>(heads) * a.num_keys;
  for (int h = 0; h < heads; ++h)
    inv[h] = Softmax<V>(a.weights + static_cast<int64_t>(h) * a.num_keys, a.num_keys, a.scale,
                        a.sinks[a.head_begin + h]);
  for (int j0 = 0; j0 < a.num_keys; j0 += kKeyChunk) {
    const int j1 = a.num_keys - j0 < kKeyChunk ? a.num_keys : j0 + kKeyChunk;
    ForHeadBlocks<V, Values>(a, j0, j1, static_cast<const float*>(inv));
  }
}

}  // namespace flashserve::kernels::attention
