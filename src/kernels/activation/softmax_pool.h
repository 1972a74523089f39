// The compressors' running per-channel softmax pool (v4-architecture.md section 4.3.c): folding
// one more slot (values a, gate logits z) into n channels' running max, sum of exponentials and
// weighted sum, vectorised. Pure function, any thread; the same bits on every ISA.
#pragma once

#include <cstdint>

namespace flashserve::kernels {

// For each channel k in [0, n), with d = z[k] - max[k] and e = ExpF(-|d|) (activation/swiglu.h):
// where z[k] > max[k]: sum = sum * e + 1, wsum = wsum * e + a[k], max = z[k] (e rescales the old
// terms); else sum = sum + e, wsum = wsum + e * a[k]. Each product and sum rounded on its own
// (no FMA), so this is the straightforward branching loop's result, e^x as ExpF.
void SoftmaxPoolFold(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum);

namespace internal {
// The vector loops behind SoftmaxPoolFold (only callable where IsaSupported of their ISA).
void SoftmaxPoolFoldAvx512(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum);
void SoftmaxPoolFoldAvx2(const float* a, const float* z, int64_t n, float* max, float* sum, float* wsum);
}  // namespace internal

}  // namespace flashserve::kernels
