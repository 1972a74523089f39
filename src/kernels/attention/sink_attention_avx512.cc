// AVX-512 instantiation of the sink-attention kernels (kernels/attention/sink_attention_simd.h)
// with the simd::Avx512 traits and its tile shapes. Compiled with AVX-512 flags; reached only
// through SinkAttentionWithIsa after a CPU check.
#include "kernels/attention/sink_attention_simd.h"
#include "kernels/simd/avx512.h"

namespace flashserve::kernels::attention {
namespace {

struct Avx512Attention : simd::Avx512 {
  // Logits: 8 heads x 3 keys (11 loads per 24 FMAs, 3 of them keys, mostly from L2); values:
  // 8 heads x 3 vectors (3 key loads and 8 broadcasts per 24 FMAs); 28 of the 32 registers.
  // The fastest of the tiles tried on Emerald Rapids with keys in cache (matmul_bench --only
  // "attention avx512"): 4 x 4 (Zen 4's best), 8 x 2, 6 x 3, 16 x 1 and 8 x 3 with 2 value
  // vectors were all slower (docs/benchmarks.md, "CPU kernels").
  static constexpr int kHeadBlock = 8;
  static constexpr int kLogitKeys = 3;
  static constexpr int kValueVectors = 3;
};

}  // namespace

void AttendAvx512(const AttentionArgs& args) { Attend<Avx512Attention>(args); }

}  // namespace flashserve::kernels::attention
