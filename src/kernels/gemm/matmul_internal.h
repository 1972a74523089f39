// Internal seam of the matrix product: the per-ISA row kernels, the plain-data call description
// the dispatcher (matmul.cc) prepares for them, and MatMulWithIsa for tests and benchmarks.
// Not part of the room's public interface. Row kernels are re-entrant; scratch is per call.
#pragma once

#include <cstdint>
#include <functional>

#include "base/thread_pool.h"
#include "kernels/simd/isa.h"
#include "model/matrix.h"

namespace flashserve::kernels::internal {

// One MatMul call, resolved by the dispatcher: plain data, so that the ISA kernels need no
// inline code from translation units built for another instruction set.
struct MatMulArgs {
  model::MatrixFormat format = model::MatrixFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  int64_t scale_cols = 0;
  int tile_rows = 1;
  int tile_cols = 1;
  int tile_shift = 0;  // FP8 with fp8_vector: log2(tile_cols)
  bool fp4_lane_pairs = false;  // FP4 in model::Fp4Layout::kLanePairs (AVX-512 kernels only)
  // Direct mode dequantizes weights in registers, again for each group of activation rows;
  // otherwise (FP8 with n > 8) each task dequantizes panel_rows weight rows into scratch and
  // reuses them for every activation row.
  bool direct = false;
  // FP8 direct mode for n <= 2 multiplies the activations, not the weights, by the tile factor
  // (one multiply per tile instead of one per weight row). Chosen only when every such product
  // is exact, so that it gives the same bits as scaling the weights. Needs tile_rows % 8 == 0.
  bool fp8_scale_x = false;
  // FP8 weights are decoded by the vector decoders: tile_cols is a power of two of at least
  // one vector and every scale byte is <= 246, so each weight e4m3 * 2^-8 * 2^(s-119) is an
  // exact f32. Otherwise panels are filled from the scalar tables.
  bool fp8_vector = false;
  // With fp8_scale_x: FP8 decoded without the f16 conversion (simd DecodeFp8Low, faster at
  // n = 1, slower than f16 where FMAs fill the pipes): each weight is e4m3 * 2^-120 and the
  // activations are multiplied by 2^(s-7). Chosen where every scale byte is <= 134, that product
  // is exact, and the calling thread does not treat subnormal inputs as zero (e4m3 subnormals
  // become f32 subnormals). The same products, so the same bits, as the f16 route.
  bool fp8_low = false;
  // FP8 with n <= 64 where fp8_scale_x is not chosen, in bands (weight rows sharing a row of
  // scale tiles) of at least 128 rows or with n <= 8 (gemm/matmul_prescaled.h): each thread
  // multiplies the activations by a band's tile factors once, into scratch, when all those
  // products are exact (checked once per call against the scale range); weights then decode
  // without any multiply: with DecodeFp8Low where fp8_low (here only: scale bytes <= 134 and
  // no DAZ; factors fp8_fold_low), else the f16 route (factors fp8_fold). Otherwise the
  // weights are scaled, in registers.
  bool fp8_prescale = false;
  const float* fp8_fold_low = nullptr;  // [256] 2^(s-7)
  int fp8_scale_lo = 0, fp8_scale_hi = 0;  // the range of the scale bytes
  // AVX512-BF16 (MatMulRowsAvx512Bf16): FP4 decoded in registers, FP8 (fp8_vector) in registers
  // for 5-8 rows (direct) or in panels for n >= 16, BF16 weights (cols a multiple of 32, their
  // exponent range known: model::Matrix::SetExponentRange) rearranged in registers, all into
  // BF16 pairs; x holds the activations as BF16 pairs (one 32-bit lane per
  // two columns, the one the f32 path adds first in the high half; ldx counts pairs; cols
  // stays the real count). Chosen only where it gives the f32 paths' bits: every activation is
  // an exact, finite BF16 (FP8-rounded activations are), every dequantized weight a normal (or
  // zero) BF16 (FP4 scale bytes in [2, 252], FP8 in [10, 246], BF16 exponent fields in
  // [1, 254]), every product a multiple of at least 2^-126 (so no product or running sum is
  // subnormal: the instruction flushes those),
  // and MXCSR rounds to nearest. Each step is then an FMA of an exact product in the f32
  // path's order.
  bool bf16_pairs = false;
  // AMX (MatMulRowsAmx): x holds the activations packed into B tiles (PackAmxActivations, or
  // with amx_split PackAmxSplitActivations), n counts them, and activation i's outputs go to
  // row amx_rows[i] of y.
  const int32_t* amx_rows = nullptr;
  bool amx_split = false;
  int64_t panel_rows = 0;
  int64_t padded_cols = 0;  // panel row stride: cols rounded up to the ISA step
  int64_t n = 0;
  const float* x = nullptr;  // FP4: x with each 2L-column group stored evens first (L = lanes)
  int64_t ldx = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  const float* e8m0 = nullptr;         // [256] 2^(s-127)
  const float* fp8_fold = nullptr;     // [256] FP8 scale times the decode factor: 2^(s-119), fp8_low 2^(s-7)
  const float* e4m3 = nullptr;         // [256] exact e4m3 values (scalar FP8 panels)
  const float* e2m1_scaled = nullptr;  // [256][16] e2m1 values times 2^(s-127), per scale byte s
  const uint16_t* e4m3_bf16 = nullptr;  // [256][128] e4m3 magnitudes times 2^(s-127) in BF16 (127: 480)
  const uint16_t* e2m1_bf16 = nullptr;  // [256][32] the same in BF16, twice (16..31 = 0..15), 64-byte aligned
};

// The head of the scratch in fp8_prescale mode, reset by MatMulWithIsa at the start of each
// call on each thread: how this call's activations are scaled (decided by the thread's first
// rows) and which band's scaled activations follow the head.
struct PrescaleState {
  int mode = -1;  // -1 undecided, else gemm::PrescaleMode
  int64_t band = -1;
};
constexpr int64_t kPrescaleHeadFloats = 16;  // 64 bytes: the activations stay aligned

// Computes y[:, row_begin:row_end) (all n activation rows). scratch holds panel_rows *
// padded_cols floats (panels) or kPrescaleHeadFloats + n * cols (fp8_prescale) and is unused in
// the other direct modes. Only callable where IsaSupported(isa).
void MatMulRowsAvx512(const MatMulArgs& args, int64_t row_begin, int64_t row_end, float* scratch);
void MatMulRowsAvx2(const MatMulArgs& args, int64_t row_begin, int64_t row_end, float* scratch);
// FP4 and FP8 with bf16_pairs only; only callable where Avx512Bf16Supported(). FP8 uses scratch
// for panels (panel_rows x ldx pairs).
void MatMulRowsAvx512Bf16(const MatMulArgs& args, int64_t row_begin, int64_t row_end, float* scratch);
// VDPBF16PS instructions retired per VFMADD231PS (both 512-bit, 12 independent chains each;
// the faster of three tries), measured on the calling core (same condition). At a rate of 1 a
// dot product of pairs does twice an FMA's work; Emerald Rapids runs VDPBF16PS at a fraction of
// the FMA rate (docs/benchmarks.md, "CPU kernels").
double Bf16DotRateVsFmaAvx512();
// Its activation checks and packing (same condition). The exponent field of the smallest
// nonzero |x| (255: all zero), or -1 unless every value is a finite, exact BF16, zero or normal.
int Bf16ActivationFieldAvx512(const float* x, int64_t n, int64_t ldx, int64_t cols);
// x as BF16 pairs, `pairs` lanes per row (a multiple of 16, zero past cols): FP4 order (pair c =
// columns 2c, 2c + 1) or FP8 order (pair l of each 16 = columns g + l, g + 16 + l).
void PackBf16PairsAvx512(const float* x, int64_t n, int64_t ldx, int64_t cols, bool fp4, int64_t pairs, uint32_t* out);
// AMX tiles (only callable where AmxSupported()): FP4, and FP8 with tile_cols >= 32 a power of
// two, with weights that are normal (or zero) BF16 once dequantized (scale bytes as for
// bf16_pairs) and every activation an exact BF16 (x from PackAmxActivations); or (amx_split)
// BF16 or such FP8 weights with any activations (x from PackAmxSplitActivations); cols % 32 == 0. Computes the weight-row ranges [r0, r1) that
// next_rows(&r0, &r1) hands out until it returns false, on the calling thread, configuring its
// tiles once; scratch holds AmxScratchFloats(cols) floats on a cache line. Its bits are its own
// (matmul_amx.cc), not the f32 paths'.
void MatMulRowsAmx(const MatMulArgs& args, const std::function<bool(int64_t*, int64_t*)>& next_rows, float* scratch);
int64_t AmxScratchFloats(int64_t cols);
// Activation rows rows[0..n) of x as B tiles: per block of w = min(n, 16) rows and step of 32
// columns, 16 rows of w words, row p holding pair p of each activation row, zero past n: fp4,
// PackBf16PairsAvx512's FP4 order (columns 2p, 2p + 1 in the high, low half); else column order
// (2p in the low half). out (64-byte aligned) holds ceil(n / 16) *
// cols / 32 * 16 * w words; this call writes blocks [b0, b1) of them (threads may pack blocks
// side by side).
void PackAmxActivations(const float* x, int64_t ldx, const int32_t* rows, int64_t n, int64_t cols, bool fp4,
                        int64_t b0, int64_t b1, uint32_t* out);

// The rows [r0, r1) of an AMX call with split activations (matmul_amx_split.cc; BF16 or FP8
// weights), tiles configured for it.
void AmxSplitRows(const MatMulArgs& args, int64_t r0, int64_t r1, float* scratch);
// Rows rows[0..n) of x split into three exact BF16 parts (matmul_amx_split.cc), each packed as
// PackAmxActivations packs, but pairs in column order (column 2p in the low half); part p's
// tiles p * ceil(n / 16) * cols / 32 * 16 * min(n, 16) words after the first; blocks [b0, b1).
void PackAmxSplitActivations(const float* x, int64_t ldx, const int32_t* rows, int64_t n, int64_t cols, int64_t b0,
                             int64_t b1, uint32_t* out);
constexpr int kAmxSplitParts = 3;

// Vector width in floats of each ISA's accumulators (generic: the portable 16-lane order).
int IsaLanes(Isa isa);

// How many groups of activation rows MatMulWithIsa runs side by side, each against all weight
// rows (1: it splits the weight rows instead). Exposed for tests.
int64_t ActivationRowGroups(const model::Matrix& w, int64_t n, int64_t num_tasks, int threads);

// MatMul (kernels/gemm/matmul.h) with a chosen instruction set instead of BestIsa(); the ISA
// must be supported. Results are bit-identical for every n, ldx, ldy and pool size.
void MatMulWithIsa(Isa isa, const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y,
                   int64_t ldy, base::ThreadPool& pool);

// MatMul (kernels/gemm/matmul.h) where AMX is on: products that AMX takes (AmxTakes) run on
// its tiles for the activation rows that are exact BF16 values; the other rows with split
// activations (three passes) for BF16 and FP8 weights (AmxSplits), on the AVX-512 paths for
// FP4 (each row by a property of its own values, so a row's bits never depend on its batch);
// everything else as MatMulWithIsa(kAvx512). Only callable where AmxSupported().
void MatMulAmx(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
               base::ThreadPool& pool);
// Whether AMX takes products with w (format, shape and scale range; not the activations).
bool AmxTakes(const model::Matrix& w);
// Whether AMX takes w's products whatever the activations, splitting those that are not exact
// BF16 values (BF16 weights: every row; FP8: rows that are not exact BF16 values). Only where
// AmxTakes(w).
bool AmxSplits(const model::Matrix& w);
// Whether AMX splits every activation row of w's products (BF16 weights), not only inexact ones.
bool AmxSplitsEveryRow(const model::Matrix& w);

// Whether a call with these activations takes the AVX512-BF16 path (tests, benchmarks).
bool UsesBf16Pairs(Isa isa, const model::Matrix& w, const float* x, int64_t n, int64_t ldx);

}  // namespace flashserve::kernels::internal
