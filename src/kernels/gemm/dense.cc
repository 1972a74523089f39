// Dense products: packing, the portable kernel and the per-process ISA choice (kernels/gemm/dense.h).
#include "kernels/gemm/dense.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/aligned_vector.h"
#include "base/huge_pages.h"
#include "kernels/gemm/dense_internal.h"
#include "kernels/gemm/dense_tiles.h"
#include "kernels/gemm/matmul.h"
#include "kernels/simd/isa.h"

namespace flashserve::kernels {
namespace {

// Portable traits: 8 lanes of scalar FMAs, the vector paths' bits.
struct Portable {
  struct F {
    float v[8];
  };
  static constexpr int kLanes = 8;
  static F Zero() { return F{}; }
  static F Load(const float* p) {
    F r;
    std::copy_n(p, kLanes, r.v);
    return r;
  }
  static F LoadPartial(const float* p, int n) {
    F r{};
    std::copy_n(p, n, r.v);
    return r;
  }
  static void Store(float* p, const F& x) { std::copy_n(x.v, kLanes, p); }
  static void StorePartial(float* p, const F& x, int n) { std::copy_n(x.v, n, p); }
  static F Set1(float x) {
    F r;
    std::fill_n(r.v, kLanes, x);
    return r;
  }
  static F Fma(const F& a, const F& b, const F& c) {
    F r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = std::fma(a.v[l], b.v[l], c.v[l]);
    return r;
  }
  static F Add(const F& a, const F& b) {
    F r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = a.v[l] + b.v[l];
    return r;
  }
};

const internal::DenseKernel& Kernel() {
  static const internal::DenseKernel kernel = [] {
    switch (BestIsa()) {
      case Isa::kAvx512: return internal::DenseAvx512();
      case Isa::kAvx2: return internal::DenseAvx2();
      default: return internal::DensePortable();
    }
  }();
  return kernel;
}

int64_t Panels(int64_t n) { return (n + Kernel().panel - 1) / Kernel().panel; }

// Rows [r0, r1) of w as floats: F32 and BF16 directly, other formats through DequantizeRows.
void RowsAsFloats(const model::Matrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t count = (r1 - r0) * w.cols;
  if (w.format == model::MatrixFormat::kF32) {
    std::copy_n(reinterpret_cast<const float*>(w.data) + r0 * w.cols, count, out);
  } else if (w.format == model::MatrixFormat::kBF16) {
    const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data) + r0 * w.cols;
    for (int64_t i = 0; i < count; ++i) {
      const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
      std::memcpy(out + i, &bits, sizeof(float));
    }
  } else {
    DequantizeRows(w, r0, r1, out);
  }
}

}  // namespace

internal::DenseKernel internal::DensePortable() { return internal::dense::Kernel<Portable, 4>(); }

int64_t DensePackedSize(int64_t k, int64_t n) { return Panels(n) * Kernel().panel * k; }

void PackDenseRows(const float* rows, int64_t n, int64_t k, int64_t ld, float* packed, int64_t j_begin, int64_t j_end) {
  const int64_t nr = Kernel().panel;
  if (j_end < 0) j_end = n;
  const int64_t last = j_end == n ? Panels(n) * nr : j_end;  // the owner of the last column pads
  for (int64_t j = j_begin; j < last; ++j) {
    float* dst = packed + (j / nr) * nr * k + j % nr;
    if (j < n) {
      for (int64_t kk = 0; kk < k; ++kk) dst[kk * nr] = rows[j * ld + kk];
    } else {
      for (int64_t kk = 0; kk < k; ++kk) dst[kk * nr] = 0.0f;
    }
  }
}

void PackDenseCols(const float* b, int64_t k, int64_t n, int64_t ld, float* packed, int64_t k_begin, int64_t k_end) {
  internal::PackDenseColsAs(Kernel().panel, b, k, n, ld, packed, k_begin, k_end < 0 ? k : k_end);
}

void internal::PackDenseColsAs(int64_t nr, const float* b, int64_t k, int64_t n, int64_t ld, float* packed,
                               int64_t k_begin, int64_t k_end) {
  for (int64_t p = 0; p < (n + nr - 1) / nr; ++p) {
    float* dst = packed + p * nr * k;
    const int64_t j0 = p * nr, cols = std::min(nr, n - j0);
    for (int64_t kk = k_begin; kk < k_end; ++kk) {
      std::copy_n(b + kk * ld + j0, cols, dst + kk * nr);
      std::fill(dst + kk * nr + cols, dst + (kk + 1) * nr, 0.0f);
    }
  }
}

void DenseProduct(const float* a, int64_t m, int64_t lda, const float* packed, int64_t k, int64_t n, float* c,
                  int64_t ldc, bool accumulate) {
  if (m > 0 && n > 0 && k > 0) Kernel().product(a, m, lda, packed, k, n, c, ldc, accumulate);
}

void DenseMatMul(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                 base::AlignedVector<float>& packed, base::ThreadPool& pool) {
  const int64_t k = w.cols, nr = Kernel().panel;
  if (static_cast<int64_t>(packed.size()) < DensePackedSize(k, w.rows)) base::GrowInHugePages(packed, static_cast<size_t>(DensePackedSize(k, w.rows)));
  pool.ParallelFor(Panels(w.rows), 1, [&](int64_t p0, int64_t p1) {
    thread_local base::AlignedVector<float> rows;
    if (static_cast<int64_t>(rows.size()) < nr * k) rows.resize(nr * k);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = p * nr, r1 = std::min(w.rows, r0 + nr);
      RowsAsFloats(w, r0, r1, rows.data());
      PackDenseRows(rows.data(), r1 - r0, k, k, packed.data() + p * nr * k);  // one panel, padded
    }
  });
  const int64_t group = Kernel().rows;  // chunks of whole tiles: no tile is cut in two
  pool.ParallelFor((n + group - 1) / group, 4, [&](int64_t g0, int64_t g1) {
    const int64_t begin = g0 * group, end = std::min(n, g1 * group);
    DenseProduct(x + begin * ldx, end - begin, ldx, packed.data(), k, w.rows, y + begin * ldy, ldy, false);
  });
}

}  // namespace flashserve::kernels
