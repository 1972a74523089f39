// The matrix product against checkpoint weights on an NVIDIA GPU, in the CPU kernels' AVX-512
// reduction order (kernels/gemm/matmul_simd.h with 16 lanes): y[i, :] = W x[i, :] comes out
// bit-identical to kernels::MatMul on an AVX-512 CPU, so a GPU replica and a CPU replica give
// the same logits and tokens, alone or batched. The exact order fixes the parallelism to 16
// FMA chains per output (no split-K, no tensor cores): this is the decode path (few activation
// rows); it handles any n, re-reading the weights once per group of 1-8 rows.
//
// Weights are uploaded once into a lane-major layout: each row is cut into groups of 256
// bytes in which lane l's 16 bytes hold its own elements of consecutive 16-column blocks
// (FP4: 32-column blocks, byte l of each), so the 16 threads of a half-warp read 256
// contiguous bytes per step with one 16-byte load each. Scales stay ue8m0 bytes, each row
// padded to the groups (FP4: 16 bytes per group, one aligned load).
// Formats: F32, BF16, F16, FP8 e4m3 with power-of-two tiles of at least 16 columns, FP4 e2m1
// (cols a multiple of 32). An FP8 NaN code (0x7F / 0xFF) reads as the CPU reads it: +-480
// (its vector decoders), or NaN where a scale byte above 246 sends the CPU to its scalar one.
// Built only with -DFLASHSERVE_CUDA=ON; every call returns a Status. Threads: a DeviceMatrix
// is immutable after Upload and may be shared; an ExactMatMul (its scratch) belongs to one
// thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "kernels/cuda/exact_matmul_kernels.h"
#include "model/matrix.h"

namespace flashserve::kernels::cuda {

// The device this process computes on (device 0): "NVIDIA H200, 132 SMs, 139.8 GiB", or why
// there is none (no driver, no device).
base::Result<std::string> DeviceDescription();

// n floats of device memory. Move-only.
class DeviceFloats {
 public:
  DeviceFloats() = default;
  static base::Result<DeviceFloats> Allocate(int64_t n);
  DeviceFloats(DeviceFloats&& o) noexcept;
  DeviceFloats& operator=(DeviceFloats&& o) noexcept;
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  ~DeviceFloats();

  float* data() const { return data_; }
  int64_t size() const { return size_; }
  base::Status CopyFromHost(const float* host, int64_t n);  // the first n floats
  base::Status CopyToHost(float* host, int64_t n) const;

 private:
  float* data_ = nullptr;
  int64_t size_ = 0;
};

// A weight matrix resident on the device in the lane-major layout. Move-only.
class DeviceMatrix {
 public:
  DeviceMatrix() = default;
  // kUnimplemented for FP8 tiles the kernels do not take (not a power of two >= 16 columns)
  // and FP4 rows that are not a multiple of 32 columns.
  static base::Result<DeviceMatrix> Upload(const model::Matrix& w);
  DeviceMatrix(DeviceMatrix&& o) noexcept;
  DeviceMatrix& operator=(DeviceMatrix&& o) noexcept;
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
  ~DeviceMatrix();

  model::MatrixFormat format() const { return static_cast<model::MatrixFormat>(m_.format); }
  int64_t rows() const { return m_.rows; }
  int64_t cols() const { return m_.cols; }
  int64_t groups() const { return m_.groups; }
  // Bytes a product reads: packed weights plus scales.
  int64_t weight_bytes() const { return weight_bytes_ + scale_bytes_; }

 private:
  friend class ExactMatMul;
  void Release();
  base::Status UploadScales(const model::Matrix& w);
  // The matrix's part of every launch (weights, scales, their layout and decoder choice; the
  // activation fields stay unset). Owns m_.w and m_.scale.
  internal::ExactMatMulLaunch m_;
  int64_t weight_bytes_ = 0, scale_bytes_ = 0;
};

// Runs products on the default stream; keeps the packed-activation scratch between calls, so
// one instance per thread. At most 65535 groups of rows_per_thread activation rows per call.
class ExactMatMul {
 public:
  // y[i * ldy + r] = sum over c of W[r, c] x[i * ldx + c] for i < n, r < w.rows(); x and y
  // are device pointers. Asynchronous: errors of the kernels themselves surface in
  // Synchronize. rows_per_thread: activation rows each thread carries (1, 2, 4, 8; 0 = chosen
  // from n, see RowsPerThread).
  base::Status Run(const DeviceMatrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                   int rows_per_thread = 0);
  base::Status Synchronize();
  // Activation rows per thread: the largest of 1, 2, 4, 8 that n fills. More rows share each
  // weight load and decode; fewer leave more threads. Measured on an H200 at n = 8: 8 rows
  // were the fastest, or close to it, for every shape (docs/benchmarks.md, "CUDA kernels").
  static int RowsPerThread(int64_t n);

 private:
  DeviceFloats packed_;
};

}  // namespace flashserve::kernels::cuda
