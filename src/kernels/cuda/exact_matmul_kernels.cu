// CUDA kernels of the exact-order matrix product (cuda_matmul.h), entered through the launch
// functions of exact_matmul_kernels.h from any host thread: each output y[i, r] is summed
// by the 16 threads of a half-warp, thread l playing lane l of the CPU's AVX-512 accumulator
// (an FMA chain over the lane's columns in ascending order), then the same halving tree
// (8 + 8, 4 + 4, 2 + 2, 1 + 1) through shuffles. Weights are dequantized exactly (code times a
// power-of-two scale), so every product and sum is the one the CPU computes. Built with
// --fmad=false: the only FMAs are the explicit fmaf calls.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/exact_matmul_kernels.h"

namespace flashserve::kernels::cuda::internal {

namespace {

constexpr int kThreads = 256;

// The layout's sizes (exact_matmul_kernels.h) as compile-time constants of the kernels.
template <Format F>
struct Traits {
  static constexpr int kBlocks = BlocksPerGroup(F);
  static constexpr int kX = PackedXPerLane(F);  // weights (and x values) per lane per group
};

// ue8m0: 2^(s - 127); 0xFF is NaN.
__device__ __forceinline__ float E8m0(uint32_t s) {
  if (s == 0) return __int_as_float(0x00400000);
  if (s == 255) return __int_as_float(0x7FC00000);
  return __int_as_float(static_cast<int>(s << 23));
}

__device__ __forceinline__ uint32_t WordOf(const uint4& q, int m) { return m == 0 ? q.x : m == 1 ? q.y : m == 2 ? q.z : q.w; }

// e4m3 code -> its value, exactly: the code's bits placed in an f16 (e4m3 * 2^-8, read by the
// hardware converter, subnormals included), times 256. Code 0x7F / 0xFF reads as +-480, as the
// CPU's vector decoders read it, or as NaN where the CPU reads such a matrix with its scalar
// decoder (a scale byte above 246: ExactMatMulLaunch::fp8_nan_codes).
__device__ __forceinline__ float E4m3(uint32_t b, bool nan_codes) {
  if (nan_codes && (b & 0x7F) == 0x7F) return __int_as_float(0x7FC00000);
  const unsigned short h = static_cast<unsigned short>(((b & 0x7F) << 7) | ((b & 0x80) << 8));
  return __half2float(__ushort_as_half(h)) * 256.0f;
}

// e2m1 code (low 4 bits) -> its value, exactly: the three magnitude bits as the exponent and
// first mantissa bit of a tiny f32 (code 1 is the subnormal 2^-127), times 2^126; bit 3 the sign.
__device__ __forceinline__ float E2m1(uint32_t c) {
  const float mag = __int_as_float(static_cast<int>((c & 7) << 22)) * 0x1p126f;
  return __int_as_float(__float_as_int(mag) | static_cast<int>((c & 8) << 28));
}

// The tiny f32 of the nibble at bits [4j, 4j + 4) of `word` (magnitude bits at 22..24, sign at
// 31): e2m1 * 2^-126, so that one multiply by 2^(s - 1) gives e2m1 * 2^(s - 127).
template <int kJ>
__device__ __forceinline__ float TinyE2m1(uint32_t word) {
  constexpr int p = 4 * kJ;
  const uint32_t mag = (p <= 22 ? word << (22 - p) : word >> (p - 22)) & 0x01C00000u;
  const uint32_t sign = (p + 3 <= 31 ? word << (28 - p) : word) & 0x80000000u;
  return __uint_as_float(mag | sign);
}

// The lane's weights of group g, dequantized, in the order its chain takes them. kFast: every
// scale byte of the matrix is in the range where one multiply per weight is exact (FP8: 1..246,
// the factor 2^(s - 127) built from the byte; FP4: 1..128, the factor 2^(s - 1)); otherwise each
// weight is decoded exactly with the general rules. Scale rows are padded (byte 127) past
// the row's end, where the weights are zero.
template <Format F, bool kFast>
__device__ __forceinline__ void DecodeGroup(const ExactMatMulLaunch& a, const uint4& q, const uint8_t* scale_row,
                                            int64_t g, float (&w)[Traits<F>::kX]) {
  using T = Traits<F>;
  if constexpr (F == Format::kF32) {
    w[0] = __uint_as_float(q.x);
    w[1] = __uint_as_float(q.y);
    w[2] = __uint_as_float(q.z);
    w[3] = __uint_as_float(q.w);
  } else if constexpr (F == Format::kBF16 || F == Format::kF16) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t bits = (WordOf(q, k / 2) >> (16 * (k & 1))) & 0xFFFF;
      w[k] = F == Format::kBF16 ? __uint_as_float(bits << 16)
                                : __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    }
  } else if constexpr (F == Format::kFp8) {
    // Blocks of one scale tile share a factor: read where a tile starts (tile_cols >= 16).
    const int64_t first = (g * T::kBlocks * 16) >> a.tile_shift;
    float factor = 0.0f;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t word = WordOf(q, m);
      float v[4];
      if (kFast && !__vcmpeq4(word & 0x7F7F7F7Fu, 0x7F7F7F7Fu)) {  // no 0x7F / 0xFF code in the word
        const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xFFFF), __NV_E4M3);
        const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
        v[0] = __half2float(__ushort_as_half(lo.x));
        v[1] = __half2float(__ushort_as_half(lo.y));
        v[2] = __half2float(__ushort_as_half(hi.x));
        v[3] = __half2float(__ushort_as_half(hi.y));
      } else {
#pragma unroll
        for (int t = 0; t < 4; ++t) v[t] = E4m3((word >> (8 * t)) & 0xFF, a.fp8_nan_codes);
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int k = 4 * m + t;
        if (k == 0 || ((k * 16) & ((1 << a.tile_shift) - 1)) == 0) {
          const uint32_t sb = scale_row[first + ((k * 16) >> a.tile_shift)];
          factor = kFast ? __int_as_float(static_cast<int>(sb << 23)) : E8m0(sb);
        }
        w[k] = v[t] * factor;
      }
    }
  } else {  // FP4: one scale byte per block; the group's 16 in one aligned load
    const uint4 sq = __ldg(reinterpret_cast<const uint4*>(scale_row + g * 16));
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t word = WordOf(q, m), scales = WordOf(sq, m);
      float lo[4], hi[4];
      if constexpr (kFast) {
        lo[0] = TinyE2m1<0>(word), hi[0] = TinyE2m1<1>(word), lo[1] = TinyE2m1<2>(word), hi[1] = TinyE2m1<3>(word);
        lo[2] = TinyE2m1<4>(word), hi[2] = TinyE2m1<5>(word), lo[3] = TinyE2m1<6>(word), hi[3] = TinyE2m1<7>(word);
      } else {
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          lo[t] = E2m1((word >> (8 * t)) & 0xF);
          hi[t] = E2m1((word >> (8 * t + 4)) & 0xF);
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const uint32_t sb = (scales >> (8 * t)) & 0xFF;
        const float factor = kFast ? __uint_as_float((sb + 126) << 23) : E8m0(sb);
        const int k = 4 * m + t;
        w[2 * k] = lo[t] * factor;  // the even column (low nibble) first
        w[2 * k + 1] = hi[t] * factor;
      }
    }
  }
}

// Groups whose weight loads one thread issues before it decodes any of them: enough bytes in
// flight per multiprocessor to cover device-memory latency at 16 warps per SM.
constexpr int kDepth = 4;

template <Format F, int kNi, bool kFast>
__global__ void __launch_bounds__(kThreads) ExactMatMulKernel(const ExactMatMulLaunch a) {
  using T = Traits<F>;
  const int lane = threadIdx.x & (kLanes - 1);
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / kLanes;
  // Rows past the end compute row rows - 1 again (whole half-warps take part in the shuffles)
  // and store nothing; so do activation rows past n.
  const int64_t r = row < a.rows ? row : a.rows - 1;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kNi;
  const int64_t x_stride = a.groups * kLanes * T::kX;
  const float* xs[kNi];
#pragma unroll
  for (int i = 0; i < kNi; ++i) xs[i] = a.xp + (i0 + i < a.n ? i0 + i : a.n - 1) * x_stride + lane * T::kX;
  const uint8_t* wrow = a.w + r * a.groups * kGroupBytes + lane * 16;
  const uint8_t* scale_row = nullptr;
  if constexpr (F == Format::kFp8) scale_row = a.scale + (r / a.tile_rows) * a.scale_stride;
  if constexpr (F == Format::kFp4) scale_row = a.scale + r * a.scale_stride;

  float acc[kNi];
#pragma unroll
  for (int i = 0; i < kNi; ++i) acc[i] = 0.0f;
  for (int64_t g0 = 0; g0 < a.groups; g0 += kDepth) {
    uint4 q[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth; ++d)
      q[d] = g0 + d < a.groups ? __ldg(reinterpret_cast<const uint4*>(wrow + (g0 + d) * kGroupBytes)) : uint4{};
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int64_t g = g0 + d;
      if (g >= a.groups) break;
      float w[T::kX];
      DecodeGroup<F, kFast>(a, q[d], scale_row, g, w);
#pragma unroll
      for (int i = 0; i < kNi; ++i) {
        const float4* xv = reinterpret_cast<const float4*>(xs[i] + g * kLanes * T::kX);
#pragma unroll
        for (int v = 0; v < T::kX / 4; ++v) {
          const float4 x4 = __ldg(xv + v);
          acc[i] = fmaf(w[4 * v], x4.x, acc[i]);
          acc[i] = fmaf(w[4 * v + 1], x4.y, acc[i]);
          acc[i] = fmaf(w[4 * v + 2], x4.z, acc[i]);
          acc[i] = fmaf(w[4 * v + 3], x4.w, acc[i]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kNi; ++i) {
    float v = acc[i];
#pragma unroll
    for (int width = kLanes / 2; width >= 1; width /= 2) v = v + __shfl_down_sync(0xFFFFFFFFu, v, width, kLanes);
    if (lane == 0 && row < a.rows && i0 + i < a.n) a.y[(i0 + i) * a.ldy + row] = v;
  }
}

template <Format F>
__global__ void PackKernel(const float* x, int64_t n, int64_t ldx, int64_t cols, int64_t groups, float* xp) {
  using T = Traits<F>;
  const int64_t total = n * groups * kLanes * T::kX;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int e = static_cast<int>(t % T::kX);
    const int lane = static_cast<int>(t / T::kX % kLanes);
    const int64_t g = t / (T::kX * kLanes) % groups, i = t / (T::kX * kLanes * groups);
    int64_t col;
    if constexpr (F == Format::kFp4) {
      col = (g * T::kBlocks + e / 2) * 32 + 2 * lane + (e & 1);
    } else {
      col = (g * T::kBlocks + e) * 16 + lane;
    }
    xp[t] = col < cols ? x[i * ldx + col] : 0.0f;
  }
}

template <Format F, bool kFast>
int LaunchFormat(const ExactMatMulLaunch& a, cudaStream_t stream) {
  const dim3 block(kThreads);
  const int64_t blocks = (a.rows * kLanes + kThreads - 1) / kThreads;
  const int ni = a.rows_per_launch_group;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>((a.n + ni - 1) / ni));
  switch (ni) {
    case 1: ExactMatMulKernel<F, 1, kFast><<<grid, block, 0, stream>>>(a); break;
    case 2: ExactMatMulKernel<F, 2, kFast><<<grid, block, 0, stream>>>(a); break;
    case 4: ExactMatMulKernel<F, 4, kFast><<<grid, block, 0, stream>>>(a); break;
    case 8: ExactMatMulKernel<F, 8, kFast><<<grid, block, 0, stream>>>(a); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

template <Format F>
int LaunchPack(const float* x, int64_t n, int64_t ldx, int64_t cols, float* xp, cudaStream_t stream) {
  const int64_t groups = GroupsPerRow(F, cols), total = n * groups * kLanes * Traits<F>::kX;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65536);
  PackKernel<F><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, ldx, cols, groups, xp);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchPackActivations(Format format, const float* x, int64_t n, int64_t ldx, int64_t cols, float* xp,
                          void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (format) {
    case Format::kF32: return LaunchPack<Format::kF32>(x, n, ldx, cols, xp, s);
    case Format::kBF16: return LaunchPack<Format::kBF16>(x, n, ldx, cols, xp, s);
    case Format::kF16: return LaunchPack<Format::kF16>(x, n, ldx, cols, xp, s);
    case Format::kFp8: return LaunchPack<Format::kFp8>(x, n, ldx, cols, xp, s);
    case Format::kFp4: return LaunchPack<Format::kFp4>(x, n, ldx, cols, xp, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

int LaunchExactMatMul(const ExactMatMulLaunch& a, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (a.format) {
    case Format::kF32: return LaunchFormat<Format::kF32, false>(a, s);
    case Format::kBF16: return LaunchFormat<Format::kBF16, false>(a, s);
    case Format::kF16: return LaunchFormat<Format::kF16, false>(a, s);
    case Format::kFp8:
      return a.fast_scales ? LaunchFormat<Format::kFp8, true>(a, s) : LaunchFormat<Format::kFp8, false>(a, s);
    case Format::kFp4:
      return a.fast_scales ? LaunchFormat<Format::kFp4, true>(a, s) : LaunchFormat<Format::kFp4, false>(a, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace flashserve::kernels::cuda::internal
