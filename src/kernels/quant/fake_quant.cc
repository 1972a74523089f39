// QAT fake quantization and the Hadamard transform (kernels/quant/fake_quant.h).
#include "kernels/quant/fake_quant.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/simd/isa.h"
#include "model/number_formats.h"

namespace flashserve::kernels {
namespace {

// Smallest power of two >= v (v > 0), as the ue8m0 scale of a block.
float Pow2Ceil(float v) {
  int e;
  float m = std::frexp(v, &e);  // v = m * 2^e, m in [0.5, 1)
  return m == 0.5f ? std::ldexp(1.0f, e - 1) : std::ldexp(1.0f, e);
}

template <typename RoundFn>
void FakeQuantBlocks(float* x, int64_t n, int block, float qmax, float amax_floor, RoundFn round) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    int64_t b1 = std::min<int64_t>(n, b0 + block);
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    float scale = Pow2Ceil(std::max(amax, amax_floor) / qmax);
    for (int64_t i = b0; i < b1; ++i) {
      float q = std::clamp(x[i] / scale, -qmax, qmax);
      x[i] = round(q) * scale;
    }
  }
}

}  // namespace

// Round-trip of q (|q| <= 448) through e4m3 with round-to-nearest-even, without table
// lookups: normal values keep 3 mantissa bits (integer rounding of the f32 pattern),
// subnormals (|q| < 2^-6) snap to multiples of 2^-9.
inline float RoundE4m3(float q) {
  const float a = std::fabs(q);
  if (a < 0.015625f) return std::nearbyint(q * 512.0f) * (1.0f / 512.0f);
  uint32_t bits = model::FloatToBits(q);
  bits += 0x7FFFFu + ((bits >> 20) & 1u);
  return model::BitsToFloat(bits & 0xFFF00000u);
}

namespace internal {
void FakeQuantFp8Avx512(float* x, int64_t n, int block);
void FakeQuantFp4Avx512(float* x, int64_t n, int block);
}  // namespace internal

void FakeQuantFp8(float* x, int64_t n, int block) { FakeQuantFp8WithIsa(BestIsa(), x, n, block); }

void FakeQuantFp8WithIsa(Isa isa, float* x, int64_t n, int block) {
  if (isa == Isa::kAvx512) return internal::FakeQuantFp8Avx512(x, n, block);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = Pow2Ceil(std::max(amax, 1e-4f) / 448.0f);
    const float inv = 1.0f / scale;  // exact: scale is a power of two
    for (int64_t i = b0; i < b1; ++i) x[i] = RoundE4m3(std::clamp(x[i] * inv, -448.0f, 448.0f)) * scale;
  }
}

void FakeQuantFp8Reference(float* x, int64_t n, int block) {
  FakeQuantBlocks(x, n, block, 448.0f, 1e-4f,
                  [](float q) { return model::E4m3ToFloat(model::FloatToE4m3(q)); });
}

void FakeQuantFp4(float* x, int64_t n, int block) { FakeQuantFp4WithIsa(BestIsa(), x, n, block); }

void FakeQuantFp4WithIsa(Isa isa, float* x, int64_t n, int block) {
  if (isa == Isa::kAvx512) return internal::FakeQuantFp4Avx512(x, n, block);
  FakeQuantBlocks(x, n, block, 6.0f, 6.0f * std::ldexp(1.0f, -126),
                  [](float q) { return model::E2m1ToFloat(model::FloatToE2m1(q)); });
}

void FakeQuantFp4E4m3(float* x, int64_t n, int block) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    const int64_t b1 = std::min<int64_t>(n, b0 + block);
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = model::E4m3ToFloat(model::FloatToE4m3(std::max(amax, 6.0f * std::ldexp(1.0f, -9)) / 6.0f));
    for (int64_t i = b0; i < b1; ++i)
      x[i] = model::E2m1ToFloat(model::FloatToE2m1(std::clamp(x[i] / scale, -6.0f, 6.0f))) * scale;
  }
}

void HadamardTransform(float* x, int n) {
  FS_CHECK(n > 0 && (n & (n - 1)) == 0, "Hadamard size %d is not a power of two", n);
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace flashserve::kernels
