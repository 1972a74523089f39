// Matrix-product dispatcher (kernels/gemm/matmul.h, matmul_internal.h): validates the call,
// picks the instruction set and the in-register (direct) or panel mode, or AMX tiles for the
// rows they take (MatMulAmx: the row split, packing, the tile kernels' tasks), splits output
// rows (or, where the weight rows are too few, activation rows) over the pool, and holds the
// portable kernel used where no vector ISA is available.
#include <algorithm>
#include <atomic>
#include <bit>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "base/aligned_vector.h"
#include "base/check.h"
#include "kernels/gemm/matmul.h"
#include "kernels/gemm/matmul_internal.h"
#include "kernels/simd/vec_ops.h"
#include "model/number_formats.h"

namespace flashserve::kernels {
namespace internal {
namespace {

constexpr int64_t kGenericPanelRows = 16;
constexpr int64_t kDirectMaxRows = 16;        // FP8 with n up to this: decoded in registers
constexpr int kFp8LowMaxScale = 134;         // scale bytes up to this: FP8 decoded without f16 (fp8_low)
constexpr int64_t kScaleXMaxRows = 2;         // n up to this: FP8 scales activations (fp8_scale_x)
constexpr int64_t kPrescaleMaxRows = 64;      // n up to this: FP8 activations scaled ahead (fp8_prescale),
constexpr int kPrescaleMinBand = 128;         // in bands of at least this many rows (or n up to 8)
constexpr int64_t kDirectTaskRows = 24;       // output rows per task: a multiple of 3, 4 and 8
constexpr int kTileGroupRows = 8;             // largest weight-row tile (matmul_simd.h)
constexpr int64_t kActivationGroupRows = 8;   // activation rows per pass: a multiple of 4 and 8
constexpr int64_t kPanelFloats = 32 * 1024;  // 128 KiB of dequantized weights per panel
constexpr int64_t kMinPartWork = int64_t{1} << 17;  // weights x max(2, n): a few microseconds on one core
// BF16 pairs where exact, from these row counts: where they measured faster than the f32 paths on
// Zen 4 with cold weights (FP4 on one thread, as the experts run, from one row; FP8 panels from
// 16 rows; docs/benchmarks.md, "CPU kernels").
constexpr int64_t kFp4PairsMinRows = 1;
constexpr int64_t kFp8PairsMinRows = 16;
constexpr int64_t kBf16PairsMinRows = 1;
// FP8 decoded in registers into BF16 pairs for one pass of wide tiles (5-8 rows, cols a multiple
// of 32, tiles at least 32 columns wide), where eight rows share each decode: faster than the f32
// paths there on Zen 4 (one thread, cold), slower at n = 4 and at n = 9 (docs/benchmarks.md).
constexpr int64_t kFp8RegisterPairsMinRows = 5, kFp8RegisterPairsMaxRows = 8;
std::atomic<Bf16Dots> bf16_dots{Bf16Dots::kAuto};
std::atomic<bool> amx_enabled{true};
constexpr int64_t kAmxTaskRows = 96;  // weight rows per task: whole panels of 16 and of 32 rows

// Dequantizes rows [r0, r1) through the lookup tables (the same exact values as
// DequantizeRows, which goes element by element through Matrix::At).
void DequantizePanel(const model::Matrix& w, int64_t r0, int64_t r1, float* out) {
  const int64_t cols = w.cols;
  if (w.format == model::MatrixFormat::kFp8) {
    const float* lut = model::E4m3Table();
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* q = w.data + r * cols;
      const uint8_t* s = w.scale + (r / w.tile_rows) * w.scale_cols;
      float* dst = out + (r - r0) * cols;
      for (int64_t c = 0; c < cols; ++c) dst[c] = lut[q[c]] * model::E8m0ToFloat(s[c / w.tile_cols]);
    }
  } else if (w.format == model::MatrixFormat::kFp4) {
    const float* lut = model::E2m1Table();
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* q = w.data + r * (cols / 2);
      float* dst = out + (r - r0) * cols;
      const bool checkpoint_order = w.fp4_layout == model::Fp4Layout::kCheckpoint;
      for (int64_t c = 0; c < cols; c += 2) {
        const float scale = model::E8m0ToFloat(w.scale[w.Fp4ScaleIndex(r, c / w.tile_cols)]);
        dst[c] = lut[checkpoint_order ? q[c / 2] & 0xF : w.Fp4Code(r, c)] * scale;
        dst[c + 1] = lut[checkpoint_order ? q[c / 2] >> 4 : w.Fp4Code(r, c + 1)] * scale;
      }
    }
  } else {
    DequantizeRows(w, r0, r1, out);
  }
}

// The portable kernel: panels of dequantized rows, dot products in the generic VecOps order.
void GenericMatMul(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
                   base::ThreadPool& pool) {
  const simd::VecOps& ops = simd::GetVecOps(Isa::kGeneric);
  const int64_t num_panels = (w.rows + kGenericPanelRows - 1) / kGenericPanelRows;
  pool.ParallelFor(num_panels, 1, [&](int64_t p0, int64_t p1) {
    thread_local base::AlignedVector<float> panel;
    if (panel.size() < static_cast<size_t>(kGenericPanelRows * w.cols)) panel.resize(kGenericPanelRows * w.cols);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t r0 = p * kGenericPanelRows, r1 = std::min(w.rows, r0 + kGenericPanelRows);
      const float* rows = reinterpret_cast<const float*>(w.data) + r0 * w.cols;
      if (w.format != model::MatrixFormat::kF32) {
        DequantizePanel(w, r0, r1, panel.data());
        rows = panel.data();
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t o = r0; o < r1; ++o) y[i * ldy + o] = ops.dot(rows + (o - r0) * w.cols, x + i * ldx, w.cols);
    }
  });
}

struct Tables {
  float e8m0[256], e8m0_x256[256], e8m0_x2p120[256], e2m1_scaled[256][16];
  alignas(64) uint16_t e2m1_bf16[256][32];
  alignas(64) uint16_t e4m3_bf16[256][128];
  Tables() {
    for (int s = 0; s < 256; ++s) {
      e8m0[s] = model::E8m0ToFloat(static_cast<uint8_t>(s));
      e8m0_x256[s] = e8m0[s] * 256.0f;
      e8m0_x2p120[s] = e8m0[s] * 0x1p120f;  // finite for s <= kFp8LowMaxScale
      for (int c = 0; c < 32; ++c) {
        if (c < 16) e2m1_scaled[s][c] = model::E2m1Table()[c] * e8m0[s];
        // The high half of the f32 bits: exact where the BF16 path runs (scale bytes 2..252).
        e2m1_bf16[s][c] = static_cast<uint16_t>(std::bit_cast<uint32_t>(e2m1_scaled[s][c % 16]) >> 16);
      }
      for (int m = 0; m < 128; ++m) {  // NaN (127) as the vector decoders read it: 480
        const float v = (m == 127 ? 480.0f : model::E4m3Table()[m]) * e8m0[s];
        // Exact where the BF16 path runs (scale bytes 10..246).
        e4m3_bf16[s][m] = static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16);
      }
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

int Log2IfPowerOfTwo(int v) {
  if (v <= 0 || (v & (v - 1)) != 0) return -1;
  return __builtin_ctz(static_cast<unsigned>(v));
}

using ByteRange = model::Matrix::ByteRange;

// The smallest nonzero and the largest |x| over the activations (NaN left out; inf kept).
struct Magnitudes {
  float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
};

Magnitudes ActivationMagnitudes(const float* x, int64_t n, int64_t ldx, int64_t cols) {
  Magnitudes m;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = std::fabs(x[i * ldx + c]);
      if (v != 0.0f) m.lo = std::min(m.lo, v);
      m.hi = std::max(m.hi, v);  // NaN compares false and is kept out; inf fails the test below
    }
  return m;
}

// Whether x * 2^(s - bias) is an exact, normal f32 (or zero) for every activation and every
// scale byte s in range: then scaling the activations equals scaling the weights bit for bit.
bool ActivationScalingIsExact(Magnitudes m, ByteRange range, int bias) {
  if (m.hi == 0.0f) return true;
  return std::ldexp(static_cast<double>(m.lo), range.lo - bias) >= 0x1p-126 &&
         std::ldexp(static_cast<double>(m.hi), range.hi - bias) < 0x1p127;
}

// Whether the CPU treats subnormal inputs of vector arithmetic as zero (MXCSR.DAZ).
bool DenormalsAreZero() {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & 0x40) != 0;
#else
  return true;
#endif
}

double MeasuredBf16DotRate() {
  static const double rate = Avx512Bf16Supported() ? Bf16DotRateVsFmaAvx512() : 0.0;
  return rate;
}

// Whether the BF16 dot products may run (Bf16Dots). kAuto: where the CPU runs at least
// kMinBf16DotRate of them per FMA. At 0.5 a pair's two products cost what an FMA's one does and
// the pairs' cheaper decoding still wins; the threshold sits below that, so that a CPU at 0.5
// (Zen 4's double-pumped units may be one) cannot flip between processes on a noisy probe. On
// Emerald Rapids, which runs them at a fraction of the FMA rate, the f32 paths were as fast at
// n = 1 and faster from n = 2 (docs/benchmarks.md, "CPU kernels").
constexpr double kMinBf16DotRate = 0.4;

bool Bf16DotsOn() {
  if (!Avx512Bf16Supported()) return false;  // (which implies kAvx512)
  switch (bf16_dots.load(std::memory_order_relaxed)) {
    case Bf16Dots::kOn: return true;
    case Bf16Dots::kOff: return false;
    case Bf16Dots::kAuto: return MeasuredBf16DotRate() >= kMinBf16DotRate;
  }
  return false;
}

// Whether the call may take the AVX512-BF16 path (MatMulArgs::bf16_pairs). The smallest
// activation's quantum is 2^(field - 134) and the smallest weight's 2^(s_lo - 128) (FP4: half
// of e2m1's step, times the scale), 2^(s_lo - 136) (FP8: the e4m3 subnormal step) or
// 2^(exp_lo - 134) (BF16): their product must be at least 2^-126. fp8_range: the FP8 scale
// range PrepareArgs has measured (FP4 scales are measured here, once the activations qualify).
bool ChooseBf16Pairs(Isa isa, const model::Matrix& w, const float* x, int64_t n, int64_t ldx, bool fp8_vector,
                     ByteRange fp8_range) {
  const bool fp4 = w.format == model::MatrixFormat::kFp4 && n >= kFp4PairsMinRows;
  const bool fp8 = w.format == model::MatrixFormat::kFp8 && fp8_vector &&
                   (n >= kFp8PairsMinRows ||
                    (n >= kFp8RegisterPairsMinRows && n <= kFp8RegisterPairsMaxRows && w.cols % 32 == 0 &&
                     w.tile_cols >= 32));  // one scale per 32 columns in registers
  const bool bf16 = w.format == model::MatrixFormat::kBF16 && n >= kBf16PairsMinRows && w.cols % 32 == 0 &&
                    w.exp_lo >= 1 && w.exp_hi <= 254;  // normal and finite, and known
  if ((!fp4 && !fp8 && !bf16) || (fp4 && w.cols % 32 != 0) || isa != Isa::kAvx512 || !Bf16DotsOn()) {
    return false;
  }
#if defined(__x86_64__) || defined(__i386__)
  if ((_mm_getcsr() & 0x6000) != 0) return false;  // not round-to-nearest
#endif
  const int field = Bf16ActivationFieldAvx512(x, n, ldx, w.cols);
  if (field < 0) return false;
  if (bf16) return field == 255 || field - 134 + w.exp_lo - 134 >= -126;
  const ByteRange range = fp4 ? w.ScaleRange() : fp8_range;
  const int min_scale = fp4 ? 2 : 10, max_scale = fp4 ? 252 : 246, weight_quantum = range.lo - (fp4 ? 128 : 136);
  return range.lo >= min_scale && range.hi <= max_scale && (field == 255 || field - 134 + weight_quantum >= -126);
}

// x as BF16 pairs (MatMulArgs::bf16_pairs) in a thread-local buffer of n x pairs lanes.
const float* PackBf16Pairs(const float* x, int64_t n, int64_t ldx, int64_t cols, bool fp4, int64_t pairs) {
  thread_local base::AlignedVector<uint32_t> out;
  if (out.size() < static_cast<size_t>(n * pairs)) out.resize(static_cast<size_t>(n * pairs));
  PackBf16PairsAvx512(x, n, ldx, cols, fp4, pairs, out.data());
  return reinterpret_cast<const float*>(out.data());
}

// x with each group of 2 * lanes columns stored as its even columns, then its odd columns,
// into a buffer owned by the calling thread (reused across calls).
const float* PermuteForFp4(const float* x, int64_t n, int64_t ldx, int64_t cols, int lanes) {
  thread_local base::AlignedVector<float> out;
  if (out.size() < static_cast<size_t>(n * cols)) out.resize(static_cast<size_t>(n * cols));
  for (int64_t i = 0; i < n; ++i) {
    const float* src = x + i * ldx;
    float* dst = out.data() + i * cols;
    for (int64_t g = 0; g < cols; g += 2 * lanes)
      for (int j = 0; j < lanes; ++j) {
        dst[g + j] = src[g + 2 * j];
        dst[g + lanes + j] = src[g + 2 * j + 1];
      }
  }
  return out.data();
}

void CheckCall(const model::Matrix& w, int64_t n, int64_t ldx, int64_t ldy) {
  FS_CHECK(w.valid() && w.rows >= 0 && w.cols > 0 && n >= 0, "bad matmul call: %s n=%ld", w.Describe().c_str(),
           static_cast<long>(n));
  FS_CHECK(n <= 1 || (ldx >= w.cols && ldy >= w.rows), "matmul strides ldx=%ld ldy=%ld for %s",
           static_cast<long>(ldx), static_cast<long>(ldy), w.Describe().c_str());
  if (w.format == model::MatrixFormat::kFp8)
    FS_CHECK(w.scale != nullptr && w.tile_rows > 0 && w.tile_cols > 0, "FP8 matrix without scales");
  if (w.format == model::MatrixFormat::kFp4)
    FS_CHECK(w.scale != nullptr && w.cols % 2 == 0, "FP4 matrix without scales or with odd cols");
}

// The weight fields of a call's arguments.
MatMulArgs WeightArgs(const model::Matrix& w) {
  MatMulArgs a;
  a.format = w.format;
  a.rows = w.rows;
  a.cols = w.cols;
  a.data = w.data;
  a.scale = w.scale;
  a.scale_cols = w.scale_cols;
  a.fp4_lane_pairs = w.format == model::MatrixFormat::kFp4 && w.fp4_layout == model::Fp4Layout::kLanePairs;
  a.tile_rows = w.tile_rows;
  a.tile_cols = w.tile_cols;
  return a;
}

// Resolves a call for the vector kernels: mode, FP8 decoding, panel shape, permuted FP4 input.
MatMulArgs PrepareArgs(Isa isa, const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y,
                       int64_t ldy) {
  const int lanes = IsaLanes(isa);
  const Tables& tables = GetTables();
  MatMulArgs a = WeightArgs(w);
  ByteRange range;  // FP8 only
  if (w.format == model::MatrixFormat::kFp8) {
    range = w.ScaleRange();
    a.tile_shift = Log2IfPowerOfTwo(w.tile_cols);
    a.fp8_vector = w.tile_cols >= lanes && a.tile_shift >= 0 && range.hi <= 246;
    // DecodeFp8Low turns e4m3 subnormals into f32 subnormals: only where those cost nothing.
    const bool low_range = range.hi <= kFp8LowMaxScale && !DenormalsAreZero() && !SubnormalOperandsAreSlow();
    if (a.fp8_vector && n <= kScaleXMaxRows && w.tile_rows % kTileGroupRows == 0) {
      const Magnitudes m = ActivationMagnitudes(x, n, ldx, w.cols);
      a.fp8_low = low_range && ActivationScalingIsExact(m, range, 7);
      a.fp8_scale_x = a.fp8_low || ActivationScalingIsExact(m, range, 119);
    }
    // Otherwise the kernel scales the activations ahead where that is exact (it checks). A band
    // of fewer rows leaves too little work per scaling of the activations (FP8 4096 x 4096 in
    // 32 x 32 tiles measured slower than panels at n = 32; 128-row bands faster at n = 4..64).
    a.fp8_prescale = a.fp8_vector && !a.fp8_scale_x && n <= kPrescaleMaxRows &&
                     (w.tile_rows >= kPrescaleMinBand || n <= 8);
    if (a.fp8_prescale) a.fp8_low = low_range;
    a.fp8_fold = a.fp8_scale_x && a.fp8_low ? tables.e8m0_x2p120 : tables.e8m0_x256;
    a.fp8_fold_low = tables.e8m0_x2p120;
    a.fp8_scale_lo = range.lo;
    a.fp8_scale_hi = range.hi;
  }
  // Panels pay off only where decoding costs more than streaming a decoded copy from cache:
  // FP8 with n > 16 and weights scaled in registers (measured on Zen 4, one core: panels faster
  // at n = 32, slower at n = 9, even at 16; FP4 and BF16 faster decoded in registers than with
  // panels). Prescaled activations (no multiply per weight) beat panels up to n = 64, on cold
  // weights and in L2.
  a.direct = w.format != model::MatrixFormat::kFp8 || (n <= kDirectMaxRows && a.fp8_vector) || a.fp8_prescale;
  a.padded_cols = (w.cols + lanes - 1) / lanes * lanes;
  a.panel_rows = std::clamp<int64_t>(kPanelFloats / a.padded_cols / 4 * 4, 4, 24);
  a.n = n;
  const bool fp4 = w.format == model::MatrixFormat::kFp4;
  a.bf16_pairs = ChooseBf16Pairs(isa, w, x, n, ldx, a.fp8_vector, range);
  if (a.bf16_pairs) {
    if (w.format == model::MatrixFormat::kFp8) {  // in registers below the panels' row count, else
                                                  // panels; weights scaled in full
      a.direct = n < kFp8PairsMinRows;
      a.fp8_scale_x = a.fp8_prescale = a.fp8_low = false;
      a.fp8_fold = tables.e8m0_x256;
    }
    a.ldx = (w.cols + 31) / 32 * 16;
    a.x = PackBf16Pairs(x, n, ldx, w.cols, fp4, a.ldx);
  } else {
    a.x = fp4 ? PermuteForFp4(x, n, ldx, w.cols, lanes) : x;
    a.ldx = fp4 ? w.cols : ldx;
  }
  a.y = y;
  a.ldy = ldy;
  a.e8m0 = tables.e8m0;
  a.e4m3 = model::E4m3Table();
  a.e2m1_scaled = &tables.e2m1_scaled[0][0];
  a.e2m1_bf16 = &tables.e2m1_bf16[0][0];
  a.e4m3_bf16 = &tables.e4m3_bf16[0][0];
  return a;
}

// Row tasks of one call split into contiguous parts, one per thread (fewer for little work:
// below kMinPartWork no worker is woken). Each part is consumed front to back in kPieces pieces
// through its own cursor; a thread drains its part, then takes pieces of the others. So each
// thread streams one range with its prefetches running ahead (measured faster on cold 0.4-0.5 MiB
// FP8/FP4 matrices at n = 1..8 than interleaved dynamic chunks, which start cold several times
// per call), and a thread delayed by the system costs little.
class RowParts {
 public:
  RowParts(const model::Matrix& w, int64_t n, int64_t num_tasks, int threads)
      : num_tasks_(num_tasks),
        parts_(std::clamp<int64_t>(w.rows * w.cols * std::max<int64_t>(2, n) / kMinPartWork, 1,
                                   std::min<int64_t>(threads, num_tasks))),
        piece_((num_tasks_ / parts_ + kPieces - 1) / kPieces),
        next_(static_cast<size_t>(parts_)) {
    for (int64_t p = 0; p < parts_; ++p) next_[p].store(Begin(p), std::memory_order_relaxed);
  }
  int64_t parts() const { return parts_; }

  // The pieces of part `own`, then of the other parts, one at a time, until none is left.
  class PieceCursor {
   public:
    PieceCursor(RowParts& parts, int64_t own) : parts_(parts), own_(own) {}
    bool Next(int64_t* t0, int64_t* t1) {
      for (; k_ < parts_.parts_; ++k_) {
        const int64_t p = (own_ + k_) % parts_.parts_, end = parts_.Begin(p + 1);
        const int64_t t = parts_.next_[p].fetch_add(parts_.piece_);
        if (t < end) {
          *t0 = t;
          *t1 = std::min(end, t + parts_.piece_);
          return true;
        }
      }
      return false;
    }

   private:
    RowParts& parts_;
    int64_t own_, k_ = 0;
  };
  PieceCursor Pieces(int64_t own) { return PieceCursor(*this, own); }

  // Calls fn(t0, t1) for pieces of part `own`, then of the other parts, until none is left.
  template <class Fn>
  void Drain(int64_t own, const Fn& fn) {
    PieceCursor pieces(*this, own);
    for (int64_t t0 = 0, t1 = 0; pieces.Next(&t0, &t1);) fn(t0, t1);
  }

 private:
  static constexpr int64_t kPieces = 4;
  int64_t Begin(int64_t p) const { return p * num_tasks_ / parts_; }
  const int64_t num_tasks_, parts_, piece_;
  std::vector<std::atomic<int64_t>> next_;
};

// The arguments for group g of `groups` over a's activation rows (boundaries on multiples of
// kActivationGroupRows rows, the last group taking the rest).
struct RowRange {
  int64_t begin, end;
};

// Group g of `groups` over n activation rows: boundaries on multiples of kActivationGroupRows,
// the last group taking the rest.
RowRange ActivationGroup(int64_t n, int64_t g, int64_t groups) {
  const int64_t units = n / kActivationGroupRows;
  return {g * units / groups * kActivationGroupRows, g + 1 == groups ? n : (g + 1) * units / groups * kActivationGroupRows};
}

MatMulArgs ActivationRows(const MatMulArgs& a, int64_t g, int64_t groups) {
  const auto [i0, i1] = ActivationGroup(a.n, g, groups);
  MatMulArgs part = a;
  part.n = i1 - i0;
  part.x = a.x + i0 * a.ldx;
  part.y = a.y + i0 * a.ldy;
  return part;
}

}  // namespace

// Groups of activation rows that run side by side, each against every weight row: more than
// one only where the weight rows give fewer tasks than threads (the hyper-connection mixes, 24
// rows of 4096, at prefill ran on one thread). Each output is computed the same way whichever
// rows share its call, so the bits never depend on the split. Groups are multiples of
// kActivationGroupRows rows, and each is worth waking a thread for (kMinPartWork).
int64_t ActivationRowGroups(const model::Matrix& w, int64_t n, int64_t num_tasks, int threads) {
  if (num_tasks >= threads) return 1;
  const int64_t by_work = w.rows * w.cols * n / kMinPartWork, by_rows = n / kActivationGroupRows;
  return std::clamp<int64_t>(std::min(by_work, by_rows), 1, threads);
}

int IsaLanes(Isa isa) { return isa == Isa::kAvx512 ? 16 : isa == Isa::kAvx2 ? 8 : 16; }

void MatMulWithIsa(Isa isa, const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y,
                   int64_t ldy, base::ThreadPool& pool) {
  CheckCall(w, n, ldx, ldy);
  FS_CHECK(IsaSupported(isa), "instruction set %s not supported here", IsaName(isa));
  if (n == 0 || w.rows == 0) return;
  if (isa == Isa::kGeneric || (w.format == model::MatrixFormat::kFp4 && w.cols % 32 != 0)) {
    GenericMatMul(w, x, n, ldx, y, ldy, pool);
    return;
  }
  FS_CHECK(w.format != model::MatrixFormat::kFp4 || w.fp4_layout == model::Fp4Layout::kCheckpoint || isa == Isa::kAvx512,
           "%s: the FP4 lane-pair layout is decoded only by the AVX-512 and portable kernels, not %s",
           w.Describe().c_str(), IsaName(isa));
  const MatMulArgs a = PrepareArgs(isa, w, x, n, ldx, y, ldy);
  auto* kernel = a.bf16_pairs ? &MatMulRowsAvx512Bf16 : isa == Isa::kAvx512 ? &MatMulRowsAvx512 : &MatMulRowsAvx2;
  const size_t scratch_floats = a.fp8_prescale ? static_cast<size_t>(kPrescaleHeadFloats + n * w.cols)
                                : a.direct      ? 0
                                                : static_cast<size_t>(a.panel_rows * a.padded_cols);
  const auto thread_scratch = [&] {
    thread_local base::AlignedVector<float> scratch;
    if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
    if (a.fp8_prescale) *reinterpret_cast<PrescaleState*>(scratch.data()) = PrescaleState{};
    return scratch.data();
  };
  const int64_t task_rows = a.direct ? kDirectTaskRows : a.panel_rows;
  const int64_t num_tasks = (w.rows + task_rows - 1) / task_rows;
  const int64_t row_groups = ActivationRowGroups(w, n, num_tasks, pool.num_threads());
  if (row_groups > 1) {
    pool.ParallelFor(row_groups, 1, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) kernel(ActivationRows(a, g, row_groups), 0, w.rows, thread_scratch());
    });
    return;
  }
  RowParts parts(w, n, num_tasks, pool.num_threads());
  pool.ParallelFor(parts.parts(), 1, [&](int64_t p0, int64_t p1) {
    float* scratch = thread_scratch();
    for (int64_t p = p0; p < p1; ++p)
      parts.Drain(p, [&](int64_t t0, int64_t t1) { kernel(a, t0 * task_rows, std::min(w.rows, t1 * task_rows), scratch); });
  });
}

bool AmxSplitsEveryRow(const model::Matrix& w) {
  return w.format == model::MatrixFormat::kBF16 && w.cols % 32 == 0 && w.rows > 0;
}

bool AmxSplits(const model::Matrix& w) {
  return AmxSplitsEveryRow(w) || (w.format == model::MatrixFormat::kFp8 && AmxTakes(w));
}

bool AmxTakes(const model::Matrix& w) {
  if (w.cols % 32 != 0 || w.rows == 0) return false;
  if (AmxSplitsEveryRow(w)) return true;
  if (w.format == model::MatrixFormat::kFp4) {
    const ByteRange range = w.ScaleRange();
    return range.lo >= 2 && range.hi <= 252;  // every e2m1 value times its scale a normal BF16
  }
  if (w.format == model::MatrixFormat::kFp8) {
    const ByteRange range = w.ScaleRange();  // every e4m3 value times its scale a normal BF16
    return w.tile_cols >= 32 && Log2IfPowerOfTwo(w.tile_cols) >= 0 && range.lo >= 10 && range.hi <= 246;
  }
  return false;
}

namespace {

// The rows of x AMX takes in one pass (`tiles`: those whose every value is an exact, finite
// BF16; none for BF16 weights) and the others, in buffers of the calling thread (reused: no
// allocation per call once grown).
struct RowSplit {
  std::vector<int32_t> tiles, other;
};

// The rows are checked on the pool from kPooledCheckRows on (prefill: 512 rows of up to 8192
// values, each product's check otherwise on the calling thread while the others wait).
constexpr int64_t kPooledCheckRows = 64;

const RowSplit& SplitRows(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, base::ThreadPool& pool) {
  thread_local RowSplit split;
  thread_local std::vector<uint8_t> exact;
  split.tiles.clear();
  split.other.clear();
  exact.assign(static_cast<size_t>(n), 0);
  if (!AmxSplitsEveryRow(w)) {
    uint8_t* flags = exact.data();  // the calling thread's buffer (workers have their own thread_locals)
    const auto check = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) flags[i] = Bf16ActivationFieldAvx512(x + i * ldx, 1, ldx, w.cols) >= 0;
    };
    if (n >= kPooledCheckRows) {
      pool.ParallelFor(n, 16, check);
    } else {
      check(0, n);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    (exact[static_cast<size_t>(i)] ? split.tiles : split.other).push_back(static_cast<int32_t>(i));
  return split;
}

// The AVX-512 paths for rows `rows` of x (gathered into a contiguous block, results scattered).
void OtherRows(const model::Matrix& w, const float* x, int64_t ldx, const std::vector<int32_t>& rows, float* y,
               int64_t ldy, base::ThreadPool& pool) {
  const int64_t m = static_cast<int64_t>(rows.size());
  std::vector<float> xs(static_cast<size_t>(m * w.cols)), ys(static_cast<size_t>(m * w.rows));
  for (int64_t i = 0; i < m; ++i) std::copy_n(x + rows[i] * ldx, w.cols, xs.data() + i * w.cols);
  MatMulWithIsa(Isa::kAvx512, w, xs.data(), m, w.cols, ys.data(), w.rows, pool);
  for (int64_t i = 0; i < m; ++i) std::copy_n(ys.data() + i * w.rows, w.rows, y + rows[i] * ldy);
}

// An AMX call's arguments for activation rows rows[0..n), packed into a buffer of the calling
// thread (reused across calls).
MatMulArgs AmxArgs(const model::Matrix& w, const float* x, int64_t ldx, const int32_t* rows, int64_t n, float* y,
                   int64_t ldy, bool split, base::ThreadPool& pool) {
  MatMulArgs a = WeightArgs(w);
  a.tile_shift = w.format == model::MatrixFormat::kFp4 ? 0 : Log2IfPowerOfTwo(w.tile_cols);
  a.n = n;
  a.y = y;
  a.ldy = ldy;
  a.amx_rows = rows;
  a.e2m1_bf16 = &GetTables().e2m1_bf16[0][0];
  a.e4m3_bf16 = &GetTables().e4m3_bf16[0][0];
  a.amx_split = split;
  thread_local base::AlignedVector<uint32_t> buffer;
  const int64_t words = (split ? kAmxSplitParts : 1) * (n + 15) / 16 * (w.cols / 32) * 256;
  if (buffer.size() < static_cast<size_t>(words)) buffer.resize(static_cast<size_t>(words));
  uint32_t* packed = buffer.data();  // on a cache line, as tile loads want
  const auto pack = [&](int64_t b0, int64_t b1) {
    if (split) {
      PackAmxSplitActivations(x, ldx, rows, n, w.cols, b0, b1, packed);
    } else {
      PackAmxActivations(x, ldx, rows, n, w.cols, w.format == model::MatrixFormat::kFp4, b0, b1, packed);
    }
  };
  const int64_t blocks = (n + 15) / 16;
  if (blocks == 1) {
    pack(0, 1);
  } else {  // blocks side by side: one thread packing a prefill's 32 blocks left the others waiting
    pool.ParallelFor(blocks, 1, pack);
  }
  a.x = reinterpret_cast<const float*>(packed);
  return a;
}

float* AmxScratch(const model::Matrix& w) {
  thread_local base::AlignedVector<float> scratch;
  const size_t floats = static_cast<size_t>(AmxScratchFloats(w.cols));
  if (scratch.size() < floats) scratch.resize(floats);
  return scratch.data();
}

// Activation rows `rows` of x on tiles, one pass (exact BF16 rows) or split into three.
void AmxRows(const model::Matrix& w, const float* x, int64_t ldx, const std::vector<int32_t>& rows, bool split,
             float* y, int64_t ldy, base::ThreadPool& pool) {
  if (rows.empty()) return;
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t num_tasks = (w.rows + kAmxTaskRows - 1) / kAmxTaskRows;
  // Few weight rows (the router's 64, the mixes'): groups of activation rows side by side, each
  // against every weight row, packed by its own thread (as ActivationRowGroups does for the
  // vector paths; a row's bits never depend on the group it lands in).
  if (const int64_t groups = ActivationRowGroups(w, n, num_tasks, pool.num_threads()); groups > 1) {
    pool.ParallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
      for (int64_t g = g0; g < g1; ++g) {
        const auto [i0, i1] = ActivationGroup(n, g, groups);
        const MatMulArgs a = AmxArgs(w, x, ldx, rows.data() + i0, i1 - i0, y, ldy, split, pool);
        bool first = true;
        MatMulRowsAmx(a, [&](int64_t* r0, int64_t* r1) {
          *r0 = 0;
          *r1 = w.rows;
          return std::exchange(first, false);
        }, AmxScratch(w));
      }
    });
    return;
  }
  const MatMulArgs a = AmxArgs(w, x, ldx, rows.data(), n, y, ldy, split, pool);
  RowParts parts(w, n, num_tasks, pool.num_threads());
  pool.ParallelFor(parts.parts(), 1, [&](int64_t p0, int64_t p1) {
    float* scratch = AmxScratch(w);
    for (int64_t p = p0; p < p1; ++p) {
      auto pieces = parts.Pieces(p);
      MatMulRowsAmx(a, [&](int64_t* r0, int64_t* r1) {
        int64_t t0 = 0, t1 = 0;
        if (!pieces.Next(&t0, &t1)) return false;
        *r0 = t0 * kAmxTaskRows;
        *r1 = std::min(w.rows, t1 * kAmxTaskRows);
        return true;
      }, scratch);
    }
  });
}

}  // namespace

void MatMulAmx(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
               base::ThreadPool& pool) {
  FS_CHECK(AmxSupported(), "AMX tiles not supported here");
  CheckCall(w, n, ldx, ldy);
  if (n == 0 || w.rows == 0) return;
  if (!AmxTakes(w)) {
    MatMulWithIsa(Isa::kAvx512, w, x, n, ldx, y, ldy, pool);
    return;
  }
  const RowSplit& split = SplitRows(w, x, n, ldx, pool);
  const bool splits = AmxSplits(w);
  if (split.tiles.empty() && !splits) {
    MatMulWithIsa(Isa::kAvx512, w, x, n, ldx, y, ldy, pool);
    return;
  }
  if (splits) {
    AmxRows(w, x, ldx, split.other, true, y, ldy, pool);
  } else if (!split.other.empty()) {
    OtherRows(w, x, ldx, split.other, y, ldy, pool);
  }
  AmxRows(w, x, ldx, split.tiles, false, y, ldy, pool);
}

bool UsesBf16Pairs(Isa isa, const model::Matrix& w, const float* x, int64_t n, int64_t ldx) {
  return n > 0 && w.rows > 0 && PrepareArgs(isa, w, x, n, ldx, nullptr, 0).bf16_pairs;
}

}  // namespace internal

void SetBf16Dots(Bf16Dots mode) { internal::bf16_dots.store(mode, std::memory_order_relaxed); }

bool Bf16PairsAvailable() { return BestIsa() == Isa::kAvx512 && internal::Bf16DotsOn(); }

double Bf16DotRateVsFma() { return internal::MeasuredBf16DotRate(); }

const char* MatMulIsa() { return IsaName(BestIsa()); }

void SetAmx(bool enabled) { internal::amx_enabled.store(enabled, std::memory_order_relaxed); }

bool AmxOn() { return internal::amx_enabled.load(std::memory_order_relaxed) && AmxSupported(); }

std::string NumericsName() {
  return std::string(IsaName(BestIsa())) + (AmxOn() ? "+amx" : "") + " r" + std::to_string(kNumericsRevision);
}

int AmxPasses(const model::Matrix& w, bool exact_bf16_activations) {
  if (!AmxOn() || !internal::AmxTakes(w)) return 0;
  if (internal::AmxSplitsEveryRow(w)) return internal::kAmxSplitParts;
  if (exact_bf16_activations) return 1;
  return internal::AmxSplits(w) ? internal::kAmxSplitParts : 0;
}

bool PrefersFp4LanePairs() { return BestIsa() == Isa::kAvx512; }

void MatMul(const model::Matrix& w, const float* x, int64_t n, int64_t ldx, float* y, int64_t ldy,
            base::ThreadPool& pool) {
  if (AmxOn()) {
    internal::MatMulAmx(w, x, n, ldx, y, ldy, pool);
  } else {
    internal::MatMulWithIsa(BestIsa(), w, x, n, ldx, y, ldy, pool);
  }
}

}  // namespace flashserve::kernels
