// Multi-query attention with a learned sink (v4-architecture.md section 4.3.f): H query heads
// of width D over K keys that are also the values, softmax denominators enlarged by
// exp(sink_h). One query position per call; callers parallelise over positions/heads.

// The vector kernels load each key vector once for a block of heads (8 with AVX-512, 4 with
// AVX2; logits and weighted values alike), so a call with more heads reads its keys fewer
// times; each head's result has
// one fixed order (attention/sink_attention_simd.h) and depends only on (q_h, keys, sink_h)
// and the process's ISA, never on the head range of the call or how queries are split.
#pragma once

#include <cstdint>

#include "kernels/simd/isa.h"

namespace flashserve::kernels {

// q: [num_heads, dim]; keys: num_keys pointers to dim floats; sinks: [num_heads];
// out: [num_heads, dim]; scratch: at least num_keys floats (kept for callers; the kernels use a
// per-thread buffer). Heads [head_begin, head_end) only. Single-threaded, re-entrant.
void SinkAttention(const float* q, int head_begin, int head_end, int dim, const float* const* keys,
                   int num_keys, const float* sinks, float scale, float* out, float* scratch);

// SinkAttention with a chosen instruction set (supported; tests and benchmarks).
void SinkAttentionWithIsa(Isa isa, const float* q, int head_begin, int head_end, int dim,
                          const float* const* keys, int num_keys, const float* sinks, float scale, float* out,
                          float* scratch);

// fp64 reference over all heads.
void SinkAttentionReference(const float* q, int num_heads, int dim, const float* const* keys, int num_keys,
                            const float* sinks, float scale, float* out);

}  // namespace flashserve::kernels
