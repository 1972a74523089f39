// Hyper-connection stream arithmetic (kernels/streams/streams.h) through the ISA's VecOps.
#include "kernels/streams/streams.h"

#include "base/check.h"
#include "kernels/simd/vec_ops.h"

namespace flashserve::kernels {

void MixStreamsWithIsa(Isa isa, float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb,
                       const float* y) {
  FS_CHECK(hc >= 1 && hc <= simd::kMaxStreams, "%d streams (1 to %d)", hc, simd::kMaxStreams);
  simd::GetVecOps(isa).mix_streams(x, hc, n, stride, post, comb, y);
}

void CollapseStreamsWithIsa(Isa isa, const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out) {
  FS_CHECK(hc >= 1 && hc <= simd::kMaxStreams, "%d streams (1 to %d)", hc, simd::kMaxStreams);
  simd::GetVecOps(isa).collapse(x, hc, n, stride, w, out);
}

void MixStreams(float* x, int hc, int64_t n, int64_t stride, const float* post, const float* comb, const float* y) {
  MixStreamsWithIsa(BestIsa(), x, hc, n, stride, post, comb, y);
}

void CollapseStreams(const float* x, int hc, int64_t n, int64_t stride, const float* w, float* out) {
  CollapseStreamsWithIsa(BestIsa(), x, hc, n, stride, w, out);
}

}  // namespace flashserve::kernels
