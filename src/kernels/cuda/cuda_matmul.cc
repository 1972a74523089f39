// Host side of the exact-order CUDA matrix product (cuda_matmul.h): device discovery, device
// memory, the upload into the lane-major layout, argument checks and launches.
#include "kernels/cuda/cuda_matmul.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <utility>
#include <vector>

#include "kernels/cuda/exact_matmul_kernels.h"
#include "kernels/cuda/lane_major.h"

namespace flashserve::kernels::cuda {
namespace {

using base::Error;
using base::ErrorCode;
using internal::Format;

constexpr int64_t kMaxLaunchRowGroups = 65535;  // the grid's y dimension: one per group of activation rows

Error CudaError(cudaError_t e, const char* what) {
  return Error(ErrorCode::kInternal, fmt::format("CUDA {}: {}", what, cudaGetErrorString(e)));
}

template <class T>
base::Result<T*> DeviceAlloc(int64_t bytes, const char* what) {
  void* p = nullptr;
  if (bytes > 0) {
    if (cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes)); e != cudaSuccess) {
      cudaGetLastError();  // clear it: an allocation failure is not sticky
      return Error(ErrorCode::kResourceExhausted,
                   fmt::format("CUDA: cannot allocate {} bytes for {}: {}", bytes, what, cudaGetErrorString(e)));
    }
  }
  return static_cast<T*>(p);
}

base::Status CheckSupported(const model::Matrix& w) {
  if (!w.valid() || w.rows <= 0 || w.cols <= 0)
    return Error(ErrorCode::kInvalidArgument, "CUDA matmul: empty matrix");
  if (w.format == model::MatrixFormat::kFp8 &&
      (w.tile_cols < 16 || !std::has_single_bit(static_cast<unsigned>(w.tile_cols))))
    return Error(ErrorCode::kUnimplemented,
                 fmt::format("CUDA matmul: {}: FP8 scale tiles must be a power of two of at least 16 columns",
                             w.Describe()));
  if (w.format == model::MatrixFormat::kFp4 && w.fp4_layout != model::Fp4Layout::kCheckpoint)
    return Error(ErrorCode::kUnimplemented,
                 fmt::format("CUDA matmul: {}: FP4 must be in checkpoint order (this copy is repacked for the "
                             "AVX-512 decoders)", w.Describe()));
  if (w.format == model::MatrixFormat::kFp4 && (w.cols % 32 != 0 || w.tile_cols != 32))
    return Error(ErrorCode::kUnimplemented,
                 fmt::format("CUDA matmul: {}: FP4 needs one scale per 32 columns and a multiple of 32 columns",
                             w.Describe()));
  return base::Status::Ok();
}

}  // namespace

base::Result<std::string> DeviceDescription() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    return Error(ErrorCode::kUnavailable, fmt::format("no usable CUDA device: {}", cudaGetErrorString(e)));
  }
  if (count == 0) return Error(ErrorCode::kUnavailable, "no CUDA device");
  cudaDeviceProp p{};
  if (cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess) return CudaError(e, "device properties");
  return fmt::format("{}, compute capability {}.{}, {} SMs, {:.1f} GiB", p.name, p.major, p.minor,
                     p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1ull << 30));
}

// ---- DeviceFloats

base::Result<DeviceFloats> DeviceFloats::Allocate(int64_t n) {
  if (n < 0) return Error(ErrorCode::kInvalidArgument, "CUDA: negative allocation");
  DeviceFloats d;
  FS_ASSIGN_OR_RETURN(d.data_, DeviceAlloc<float>(n * 4, "floats"));
  d.size_ = n;
  return d;
}
DeviceFloats::DeviceFloats(DeviceFloats&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
DeviceFloats& DeviceFloats::operator=(DeviceFloats&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}
DeviceFloats::~DeviceFloats() {
  if (data_ != nullptr) cudaFree(data_);
}
base::Status DeviceFloats::CopyFromHost(const float* host, int64_t n) {
  if (n < 0 || n > size_) return Error(ErrorCode::kOutOfRange, "CUDA: copy larger than the device buffer");
  if (cudaError_t e = cudaMemcpy(data_, host, n * 4, cudaMemcpyHostToDevice); e != cudaSuccess)
    return CudaError(e, "copy to device");
  return base::Status::Ok();
}
base::Status DeviceFloats::CopyToHost(float* host, int64_t n) const {
  if (n < 0 || n > size_) return Error(ErrorCode::kOutOfRange, "CUDA: copy larger than the device buffer");
  if (cudaError_t e = cudaMemcpy(host, data_, n * 4, cudaMemcpyDeviceToHost); e != cudaSuccess)
    return CudaError(e, "copy to host");
  return base::Status::Ok();
}

// ---- DeviceMatrix

base::Result<DeviceMatrix> DeviceMatrix::Upload(const model::Matrix& w) {
  FS_RETURN_IF_ERROR(CheckSupported(w));
  DeviceMatrix d;
  d.m_.format = static_cast<Format>(w.format);
  d.m_.rows = w.rows;
  d.m_.cols = w.cols;
  d.m_.groups = internal::GroupsPerRow(d.m_.format, w.cols);
  const int64_t row_bytes = d.m_.groups * internal::kGroupBytes;
  d.weight_bytes_ = w.rows * row_bytes;
  FS_ASSIGN_OR_RETURN(uint8_t* weights, DeviceAlloc<uint8_t>(d.weight_bytes_, "weights"));
  d.m_.w = weights;
  // Rows are packed and copied in slices of about 64 MiB.
  const int64_t slice_rows = std::max<int64_t>(1, (int64_t{64} << 20) / row_bytes);
  std::vector<uint8_t> staging(static_cast<size_t>(std::min(w.rows, slice_rows) * row_bytes));
  for (int64_t r0 = 0; r0 < w.rows; r0 += slice_rows) {
    const int64_t r1 = std::min(w.rows, r0 + slice_rows);
    for (int64_t r = r0; r < r1; ++r) internal::PackRowLaneMajor(w, r, staging.data() + (r - r0) * row_bytes);
    if (cudaError_t e = cudaMemcpy(weights + r0 * row_bytes, staging.data(), (r1 - r0) * row_bytes,
                                   cudaMemcpyHostToDevice);
        e != cudaSuccess)
      return CudaError(e, "weight upload");
  }
  if (w.quantized()) FS_RETURN_IF_ERROR(d.UploadScales(w));
  return d;
}

// Scale rows padded with 127 (factor 1; the weights there are zero) to the kernels' stride,
// and the scale range that picks the kernels' decoders (exact_matmul_kernels.h).
base::Status DeviceMatrix::UploadScales(const model::Matrix& w) {
  const Format f = m_.format;
  m_.tile_rows = w.tile_rows;
  m_.tile_shift = std::countr_zero(static_cast<unsigned>(w.tile_cols));
  const int64_t stride = std::max(w.scale_cols, internal::ScaleStride(f, m_.groups, w.tile_cols));
  m_.scale_stride = stride;
  const int64_t scale_rows = (w.rows + w.tile_rows - 1) / w.tile_rows;
  std::vector<uint8_t> padded(static_cast<size_t>(scale_rows * stride), 127);
  int lo = 255, hi = 0;
  for (int64_t r = 0; r < scale_rows; ++r)
    for (int64_t c = 0; c < w.scale_cols; ++c) {
      const uint8_t b = w.scale[r * w.scale_cols + c];
      padded[r * stride + c] = b;
      lo = std::min<int>(lo, b);
      hi = std::max<int>(hi, b);
    }
  m_.fast_scales = lo >= 1 && hi <= (f == Format::kFp8 ? 246 : 128);
  m_.fp8_nan_codes = f == Format::kFp8 && hi > 246;
  scale_bytes_ = static_cast<int64_t>(padded.size());
  FS_ASSIGN_OR_RETURN(uint8_t* scale, DeviceAlloc<uint8_t>(scale_bytes_, "scales"));
  m_.scale = scale;
  if (cudaError_t e = cudaMemcpy(scale, padded.data(), scale_bytes_, cudaMemcpyHostToDevice); e != cudaSuccess)
    return CudaError(e, "scale upload");
  return base::Status::Ok();
}

void DeviceMatrix::Release() {
  if (m_.w != nullptr) cudaFree(const_cast<uint8_t*>(m_.w));
  if (m_.scale != nullptr) cudaFree(const_cast<uint8_t*>(m_.scale));
  m_.w = m_.scale = nullptr;
}
DeviceMatrix::DeviceMatrix(DeviceMatrix&& o) noexcept { *this = std::move(o); }
DeviceMatrix& DeviceMatrix::operator=(DeviceMatrix&& o) noexcept {
  if (this != &o) {
    Release();
    m_ = std::exchange(o.m_, internal::ExactMatMulLaunch{});
    weight_bytes_ = std::exchange(o.weight_bytes_, 0);
    scale_bytes_ = std::exchange(o.scale_bytes_, 0);
  }
  return *this;
}
DeviceMatrix::~DeviceMatrix() { Release(); }

// ---- ExactMatMul

int ExactMatMul::RowsPerThread(int64_t n) { return n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1; }

base::Status ExactMatMul::Run(const DeviceMatrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                              int rows_per_thread) {
  if (n == 0) return base::Status::Ok();
  if (w.m_.w == nullptr) return Error(ErrorCode::kInvalidArgument, "CUDA matmul: matrix not uploaded");
  if (n < 0 || x == nullptr || y == nullptr || ldx < w.cols() || ldy < w.rows())
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("CUDA matmul: bad arguments (n {}, ldx {} for {} columns, ldy {} for {} rows)", n, ldx,
                             w.cols(), ldy, w.rows()));
  const int ni = rows_per_thread == 0 ? RowsPerThread(n) : rows_per_thread;
  if (ni != 1 && ni != 2 && ni != 4 && ni != 8)
    return Error(ErrorCode::kInvalidArgument, fmt::format("CUDA matmul: {} rows per thread (1, 2, 4 or 8)", ni));
  if ((n + ni - 1) / ni > kMaxLaunchRowGroups)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("CUDA matmul: {} activation rows in one call; at most {} with {} per thread", n,
                             kMaxLaunchRowGroups * ni, ni));
  const Format f = w.m_.format;
  const int64_t packed = n * w.groups() * internal::kLanes * internal::PackedXPerLane(f);
  if (packed_.size() < packed) {
    packed_ = DeviceFloats();
    FS_ASSIGN_OR_RETURN(packed_, DeviceFloats::Allocate(packed));
  }
  if (int e = internal::LaunchPackActivations(f, x, n, ldx, w.cols(), packed_.data(), nullptr); e != 0)
    return CudaError(static_cast<cudaError_t>(e), "activation packing launch");
  internal::ExactMatMulLaunch a = w.m_;
  a.xp = packed_.data();
  a.n = n;
  a.y = y;
  a.ldy = ldy;
  a.rows_per_launch_group = ni;
  if (int e = internal::LaunchExactMatMul(a, nullptr); e != 0)
    return CudaError(static_cast<cudaError_t>(e), "matmul launch");
  return base::Status::Ok();
}

base::Status ExactMatMul::Synchronize() {
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return CudaError(e, "matmul");
  return base::Status::Ok();
}

}  // namespace flashserve::kernels::cuda
