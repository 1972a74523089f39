// AVX-512 instantiation of the sink-attention kernels (kernels/attention/sink_attention_simd.h)
// with the simd::Avx512 traits and its tile shapes. Compiled with AVX-512 flags; reached only
// through SinkAttentionWithIsa after a CPU check.
#include "kernels/attention/sink_attention_simd.h"
#include "kernels/simd/avx512.h"

namespace flashserve::kernels::attention {
namespace {

struct Avx512Attention : simd::Avx512 {
  // Logits: 4 heads x 4 keys (8 loads per 16 FMAs); values: 4 heads x 4 vectors (4 key loads
  // and 4 broadcasts per 16 FMAs). Measured on Zen 4 at 4..64 heads, dim 512, 128..1000 keys:
  // 90-99 GFLOP/s on one core; 4 x 6 and 6 x 4 tiles were within 5%.
  static constexpr int kHeadBlock = 4;
  static constexpr int kLogitKeys = 4;
  static constexpr int kValueVectors = 4;
};

}  // namespace

void AttendAvx512(const AttentionArgs& args) { Attend<Avx512Attention>(args); }

}  // namespace flashserve::kernels::attention
