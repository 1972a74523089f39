// Matrix products against checkpoint weights: y[i, :] = W x[i, :] for n activation rows, W a
// model::Matrix (F32/BF16/F16, FP8 tiles or packed FP4) dequantized on the fly. Called by the
// engine thread; work is split over output features on the given pool.
// Batch invariance: each y[i, o] is computed with one fixed reduction order that depends only
// on the input length (and the process's instruction set and AMX switch, fixed per process),
// never on n, the row index, the thread count or the tiling, so a row's result is bit-identical
// however many rows share the call.
#pragma once

#include <cstdint>
#include <string>

#include "base/thread_pool.h"
#include "model/matrix.h"

namespace flashserve::kernels {

// x: [n, w.cols] with row stride ldx floats; y: [n, w.rows] with row stride ldy floats.
void MatMul(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
            base::ThreadPool& pool);

// Naive reference: element-by-element dequantization, fp64 accumulation, one thread.
void MatMulReference(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy);

// Dequantizes rows [row_begin, row_end) of w into out ([rows, w.cols] floats, row-major).
void DequantizeRows(const model::Matrix& w, int64_t row_begin, int64_t row_end, float* out);

// Name of the instruction set the optimized kernels use on this CPU ("avx512", "avx2", "generic").
const char* MatMulIsa();

// Whether this process's kernels decode FP4 faster from model::Fp4Layout::kLanePairs (the
// AVX-512 ones: one shuffle fewer per 32 weights; FP4 768 x 1024 on Zen 4, QAT activations, in
// L2: less time at every row count measured). Only the AVX-512 and portable kernels read that
// layout; the others reject it.
bool PrefersFp4LanePairs();

// FP4 and FP8 products use AVX512-BF16 dot products where they give the same bits as the f32
// paths (activations that are exact BF16 values, e.g. FP8-rounded by the QAT emulation) and the
// CPU has them: kAuto (the default) only where it also runs at least 0.4 of them per FMA
// (measured once per process: no on Emerald Rapids; on Zen 4 and 5 these paths ran faster than
// the f32 ones, so they should pass, though the probe has not run there yet), kOn wherever it has
// them (tests, A/B comparisons), kOff never. A process-wide switch; whether they are on here.
enum class Bf16Dots { kAuto, kOn, kOff };
void SetBf16Dots(Bf16Dots mode);
bool Bf16PairsAvailable();
// VDPBF16PS instructions this CPU retires per FMA (0 without AVX512-BF16): what kAuto decides by.
double Bf16DotRateVsFma();

// AMX tiles (Sapphire Rapids and later): FP4 and FP8 products with activations that are exact
// BF16 values, and BF16 and FP8 products with other activations (each split exactly into three
// BF16 parts), run on TDPBF16PS, which sums in its own order: batch-invariant like every path
// (a row's bits depend on its own values only), but not the AVX-512 paths' bits, so a process
// with AMX on computes logits that differ from one with it off in the last bits. On by default
// where the CPU has it; SetAmx(false) gives the AVX-512 bits (e.g. to compare with the CUDA
// kernels or with another machine). A process-wide switch; set it before the first product.
void SetAmx(bool enabled);
// Whether this process's products use AMX (the switch, and AmxSupported()).
bool AmxOn();
// How many TDPBF16PS passes products with w take here per weight and activation row on AMX
// tiles: 0 (not on tiles), 1 (FP4, or FP8 in tiles at least 32 columns wide, scales in range,
// with activations that are exact BF16 values), 3 (BF16 weights, and such FP8 weights with
// other activations: activations split into three exact BF16 parts); cols % 32 == 0, and
// AmxOn().
int AmxPasses(const model::Matrix& w, bool exact_bf16_activations);

// Which bits this process's CPU kernels give, as a name: the ISA (IsaName(BestIsa())), with
// "+amx" where AmxOn(), and the kernels' revision (kNumericsRevision, e.g. "avx512+amx r1").
// Processes with equal names compute equal logits and states (the CUDA kernels reproduce
// "avx512"); a KV store keys its objects by it (serve::ModelFingerprint), so that hosts, and
// versions, whose bits differ never restore each other's states.
std::string NumericsName();
// Raised whenever a change gives some kernel's results other bits (a reduction order, a path's
// choice of rows): stores shared during a rolling upgrade then keep the versions apart.
inline constexpr int kNumericsRevision = 1;

}  // namespace flashserve::kernels
