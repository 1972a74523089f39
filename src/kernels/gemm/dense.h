// Dense f32 products for many rows at once (the vision tower: thousands of patch rows per
// picture): register tiles of outputs over a right-hand side packed into column panels, so each
// packed value is reused by every row. C[i, j] = sum_k A[i, k] B[k, j] is one FMA chain over k
// ascending, from zero (then added to C when accumulating): its bits depend on the values alone,
// never on the row count, tiling, threads or ISA (AVX-512, AVX2 and the portable path give equal
// bits). Re-entrant; DenseProduct runs on the calling thread, DenseMatMul on a pool.
#pragma once

#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "base/thread_pool.h"
#include "model/matrix.h"

namespace flashserve::kernels {

// Floats a packed k x n right-hand side takes (n rounded up to whole panels of this process's width).
int64_t DensePackedSize(int64_t k, int64_t n);
// Packs B given as n rows of k values (B[k, j] = rows[j * ld + k]): C = A W^T. Only the columns
// j in [j_begin, j_end) (j_end -1: n) and, with the last column, the padding: disjoint ranges
// may be packed by different threads.
void PackDenseRows(const float* rows, int64_t n, int64_t k, int64_t ld, float* packed, int64_t j_begin = 0,
                   int64_t j_end = -1);
// Packs B given as k rows of n values (B[k, j] = b[k * ld + j]): C = A B. Only the rows
// [k_begin, k_end) (k_end -1: k), so that disjoint ranges may be packed by different threads.
void PackDenseCols(const float* b, int64_t k, int64_t n, int64_t ld, float* packed, int64_t k_begin = 0,
                   int64_t k_end = -1);

// C[i, :] = A[i, :] B (added to C with `accumulate`) for the m rows of A (row stride lda); C's
// row stride ldc. `packed` from PackDenseRows / PackDenseCols with the same k and n.
void DenseProduct(const float* a, int64_t m, int64_t lda, const float* packed, int64_t k, int64_t n, float* c,
                  int64_t ldc, bool accumulate);

// y[i, :] = W x[i, :] for any weight format (dequantized exactly into `packed`, grown as needed,
// once per call), the n rows split over the pool.
void DenseMatMul(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                 base::AlignedVector<float>& packed, base::ThreadPool& pool);

}  // namespace flashserve::kernels
