// AVX2 instantiation of the sink-attention kernels (kernels/attention/sink_attention_simd.h)
// with the simd::Avx2 traits and its tile shapes. Compiled with AVX2 flags; reached only
// through SinkAttentionWithIsa after a CPU check.
#include "kernels/attention/sink_attention_simd.h"
#include "kernels/simd/avx2.h"

namespace flashserve::kernels::attention {
namespace {

struct Avx2Attention : simd::Avx2 {
  // 16 registers: logits 4 heads x 2 keys, values 4 heads x 2 vectors (8 accumulators each).
  static constexpr int kHeadBlock = 4;
  static constexpr int kLogitKeys = 2;
  static constexpr int kValueVectors = 2;
};

}  // namespace

void AttendAvx2(const AttentionArgs& args) { Attend<Avx2Attention>(args); }

}  // namespace flashserve::kernels::attention
