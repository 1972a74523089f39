// Vector matrix-product kernels (register tiles, prefetch stream, row loops and passes) as
// templates on ISA traits V, instantiated through gemm/matmul_panels.h by matmul_avx2.cc /
// matmul_avx512.cc with internal-linkage traits, so no inline code built for one ISA is linked
// into another's path. Re-entrant; no state.

// Reduction order (the batch-invariance contract): y[i, o] has one accumulator of V::kLanes
// lanes; lane l sums, with FMA, the products of the columns it owns in ascending order, where
// a row's columns are taken in blocks of kLanes (FP4: blocks of 2*kLanes laid out as the
// kLanes even columns, then the kLanes odd ones) and the last block is zero-padded; then
// V::Sum's fixed tree. Weights are dequantized exactly, so the direct (in-register) and panel
// (dequantized buffer) paths, and every tile shape, give equal bits. Sources with a Dot step
// (BF16 pairs, gemm/matmul_avx512_bf16.cc) hold two of a lane's columns per lane and add them in
// that same order.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/gemm/matmul_internal.h"
#include "kernels/gemm/matmul_rows.h"
#include "kernels/simd/tile_sums.h"

namespace flashserve::kernels::internal::gemm {

// Prefetching of weights streamed from memory (measured on Zen 4, cold 0.5-4 MiB matrices,
// n = 1, one thread: faster than prefetching only the next tile's rows): the stream runs
// kPrefetchLead bytes (a source's own Src::kPrefetchLead where it has one) past the next
// register tile, and a call's first kWarmBytes are requested before its first tile, so that a
// cold matrix streams at full rate from its first rows.
constexpr uintptr_t kPrefetchLead = 4096;
constexpr uintptr_t kWarmBytes = 16384;

// acc + w * x in the tile: an FMA per lane, or the source's own step where it has one (FP4 with
// BF16 pairs: two FMAs per lane, gemm/matmul_avx512_bf16.cc).
template <class V, class Src, class F>
inline F MulAdd(F w, F x, F acc) {
  if constexpr (requires { Src::Dot(w, x, acc); }) {
    return Src::Dot(w, x, acc);
  } else {
    return V::Fma(w, x, acc);
  }
}

// Cache lines [next, end) that one register tile requests while it multiplies.
struct PrefetchSpan {
  uintptr_t next = 0, end = 0;
};

// y[i, o0 + j] for MR activation rows xs[i] and NR weight rows o0 + j: the register tile.
// kPrefetch: the tile requests the lines of `span` (a template parameter, so that tiles without
// one carry no prefetch bookkeeping in their registers). A source with a LoadRows<MR, NR, kVecs>
// decodes the tile's rows of a step together (to share work between them), else each row's
// Cursor::Load decodes its own.
template <class V, int MR, int NR, bool kPrefetch, class Src>
inline void Tile(const Src& src, int64_t o0, const float* const* xs, int64_t cols, float* const* ys,
                 PrefetchSpan span = {}) {
  using F = typename V::F;
  constexpr int L = V::kLanes, kVecs = Src::kStep / L;
  typename Src::Cursor rows[NR];
  for (int j = 0; j < NR; ++j) rows[j] = src.Row(o0 + j);
  // Every loop over the tile is unrolled, so that the accumulators never need a stack home.
  F acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = V::Zero();
  // Prefetches go into L2, kLines cache lines per step: as many bytes as the tile reads from a
  // streamed source (so a span of the next tile's rows keeps pace), two from a panel (whose
  // span, a share of the next panel's raw weights, is smaller than that).
  constexpr int kLines = !kPrefetch ? 0 : Src::kStepBytes > 0 ? (NR * Src::kStepBytes + 63) / 64 : 2;
  uintptr_t pf = span.next & ~uintptr_t{63}, pf_end = span.end;
  const int64_t full = cols - cols % Src::kStep;
  int64_t k = 0;
  for (; k < full; k += Src::kStep) {
    for (int p = 0; p < kLines; ++p) {
      if (pf < pf_end) V::Prefetch(pf);
      pf += 64;
    }
    F w[NR][kVecs];
    if constexpr (requires { Src::template LoadRows<MR, NR, kVecs>(rows, k, w); }) {
      Src::template LoadRows<MR, NR, kVecs>(rows, k, w);  // rows that share a decoding table
    } else {
      for (int j = 0; j < NR; ++j) rows[j].Load(k, w[j]);
    }
    for (int v = 0; v < kVecs; ++v)
      for (int i = 0; i < MR; ++i) {
        F xv = V::Load(xs[i] + k + v * L);
        V::KeepInRegister(xv);  // one load per activation vector, not one per FMA operand
        if constexpr (Src::kScalesX) xv = V::Mul(xv, rows[0].XScale(k));  // one tile row per tile
        for (int j = 0; j < NR; ++j) acc[i][j] = MulAdd<V, Src>(w[j][v], xv, acc[i][j]);
      }
  }
  if (k < cols) {  // only sources with kStep == kLanes have tails
    const int rem = static_cast<int>(cols - k);
    F w[NR][kVecs];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) rows[j].Tail(k, rem, w[j]);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      F xv = V::Load(Staged<V, float, L>(xs[i] + k, rem).v);
      if constexpr (Src::kScalesX) xv = V::Mul(xv, rows[0].XScale(k));
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = MulAdd<V, Src>(w[j][0], xv, acc[i][j]);
    }
  }
  simd::StoreSums<V, MR, NR>(acc, ys, o0);
}

// The span a tile starting at weight row o of a first pass over streamed weights requests: the
// rows the next tile reads, kPrefetchLead bytes further on (hardware prefetchers stop at page
// boundaries and a row is often exactly a page).
template <int NR, class Src>
PrefetchSpan Ahead(const Src& src, int64_t o) {
  uintptr_t lead = kPrefetchLead;
  if constexpr (requires { Src::kPrefetchLead; }) lead = Src::kPrefetchLead;
  const uintptr_t end = reinterpret_cast<uintptr_t>(src.RowStart(INT64_MAX));
  return {reinterpret_cast<uintptr_t>(src.RowStart(o + NR)) + lead,
          std::min(end, reinterpret_cast<uintptr_t>(src.RowStart(o + 2 * NR)) + lead)};
}

// Sources that store their rows in groups (Src::kGroupRows > 1: FP4 lane pairs) decode a tile
// whose rows lie in one group from its first row's cursor (Src::LoadGroup): the tile keeps one
// data and one scale pointer, not one of each per row (GCC 12, the n = 1 tile of 8 FP4 rows: 72
// -> 64 instructions per step of its inner loop, its two stack reloads gone).
template <class Src>
constexpr int64_t GroupRows() {
  if constexpr (requires { Src::kGroupRows; }) {
    return Src::kGroupRows;
  } else {
    return 1;
  }
}

template <class Src>
struct WithinGroup : Src {
  static constexpr int64_t kGroupRows = 1;  // already within one: no further dispatch
  template <int MR, int NR, int kVecs>
  static void LoadRows(const typename Src::Cursor* rows, int64_t k, typename Src::F (*w)[kVecs]) {
    Src::template LoadGroup<NR, kVecs>(rows[0], k, w);
  }
};

// Activation rows [i0, i0 + MR) against weight rows [r0, r1): NR weight rows per tile, then
// single rows. The tile shape changes only which products share registers, never a result.
// The first pass over streamed weights prefetches ahead of itself; over a panel, the tiles
// share out `window` (bytes to request meanwhile) equally.
template <class V, int MR, int NR, class Src>
void RowGroup(const Src& src, const MatMulArgs& a, int64_t i0, int64_t r0, int64_t r1, PrefetchSpan window) {
  const float* xs[MR];
  float* ys[MR];
  for (int t = 0; t < MR; ++t) {
    xs[t] = a.x + (i0 + t) * a.ldx;
    ys[t] = a.y + (i0 + t) * a.ldy;
  }
  if constexpr (GroupRows<Src>() > 1 && GroupRows<Src>() % NR == 0) {
    if (r0 % NR == 0) {  // every tile, and every single row after them, within one group
      RowGroup<V, MR, NR>(WithinGroup<Src>{src}, a, i0, r0, r1, window);
      return;
    }
  }
  int64_t o = r0;
  if (Src::kStepBytes > 0 && i0 == 0) {
    for (; o + NR <= r1; o += NR) Tile<V, MR, NR, true>(src, o, xs, a.cols, ys, Ahead<NR>(src, o));
    for (; o < r1; ++o) Tile<V, MR, 1, true>(src, o, xs, a.cols, ys, Ahead<1>(src, o));
  } else if (window.next < window.end && r1 - r0 >= NR) {
    const uintptr_t share = ((window.end - window.next) / static_cast<uintptr_t>((r1 - r0) / NR) + 64) & ~uintptr_t{63};
    for (uintptr_t next = window.next; o + NR <= r1; o += NR, next += share)
      Tile<V, MR, NR, true>(src, o, xs, a.cols, ys, {next, std::min(window.end, next + share)});
    for (; o < r1; ++o) Tile<V, MR, 1, false>(src, o, xs, a.cols, ys);
  } else {
    for (; o + NR <= r1; o += NR) Tile<V, MR, NR, false>(src, o, xs, a.cols, ys);
    for (; o < r1; ++o) Tile<V, MR, 1, false>(src, o, xs, a.cols, ys);
  }
}

// Weight rows per tile for MR <= kMaxMr activation rows: the traits' kNarrowNr[MR] where they
// have one, else 4.
template <class V, int MR>
constexpr int NarrowNr() {
  if constexpr (requires { V::kNarrowNr[MR]; }) {
    return V::kNarrowNr[MR];
  } else {
    return 4;
  }
}

// Activation rows [i0, i0 + count) against weight rows [r0, r1), count <= max(kWideMr, kMaxMr):
// more than kMaxMr rows share each decoded weight vector in count x kWideNr tiles (where the ISA
// has the registers), fewer take count x NarrowNr tiles.
template <class V, class Src>
void Group(const Src& src, const MatMulArgs& a, int64_t i0, int64_t count, int64_t r0, int64_t r1,
           PrefetchSpan w) {
  if constexpr (V::kWideMr == 8) {
    switch (count) {  // 5..8
      case 5: RowGroup<V, 5, V::kWideNr>(src, a, i0, r0, r1, w); return;
      case 6: RowGroup<V, 6, V::kWideNr>(src, a, i0, r0, r1, w); return;
      case 7: RowGroup<V, 7, V::kWideNr>(src, a, i0, r0, r1, w); return;
      case 8: RowGroup<V, 8, V::kWideNr>(src, a, i0, r0, r1, w); return;
      default: break;
    }
  }
  switch (count) {
    case 1: RowGroup<V, 1, NarrowNr<V, 1>()>(src, a, i0, r0, r1, w); return;
    case 2: RowGroup<V, 2, NarrowNr<V, 2>()>(src, a, i0, r0, r1, w); return;
    case 3: if constexpr (V::kMaxMr >= 3) RowGroup<V, 3, NarrowNr<V, 3>()>(src, a, i0, r0, r1, w); return;
    default: if constexpr (V::kMaxMr >= 4) RowGroup<V, 4, NarrowNr<V, 4>()>(src, a, i0, r0, r1, w); return;
  }
}

// The bytes of weight rows [b0, b1) (the next block of a pass loop).
template <class Src>
PrefetchSpan NextBlock(const Src& src, int64_t b0, int64_t b1) {
  return {reinterpret_cast<uintptr_t>(src.RowStart(b0)), reinterpret_cast<uintptr_t>(src.RowStart(b1))};
}

// All n activation rows against weight rows [r0, r1); `window`: bytes to request meanwhile
// (panels), shared out equally over the passes. A lone activation row takes V::kSingleNr
// weight rows per tile; up to V::kWideMr rows (n x kWideNr tiles) are one pass over the
// weights. More take passes of kMaxMr rows (tiles of kMaxMr x NarrowNr, whose activation rows stay
// in L1; sources with kDecodeCost 2: kWideMr rows, fewer decodes) over blocks of about kBlockBytes
// of weights, so that the block read from memory by the first pass is still in L2 for the
// others (passes over a whole task range would stream a tall matrix from DRAM once per pass:
// the 129280-row head ran far below the FMA peak); meanwhile the second pass requests the next
// block (the head at decode batch 8 measured faster).
template <class V, class Src>
void Rows(const Src& src, const MatMulArgs& a, int64_t r0, int64_t r1, PrefetchSpan window = {}) {
  if constexpr (Src::kStepBytes > 0) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(src.RowStart(r0));
    const uintptr_t end = std::min(reinterpret_cast<uintptr_t>(src.RowStart(r1)), begin + kWarmBytes);
    for (uintptr_t line = begin & ~uintptr_t{63}; line < end; line += 64) V::Prefetch(line);
  }
  if (a.n == 1) {
    RowGroup<V, 1, V::kSingleNr>(src, a, 0, r0, r1, window);
    return;
  }
  // Wide tiles save decodes; for the cheapest decoders two full passes of kMaxMr rows run
  // faster (measured on Zen 4: BF16 at n = 8; at n = 5..7 and for FP4/FP8 the wide tiles win).
  const bool wide = a.n <= V::kWideMr && (Src::kDecodeCost > 0 || a.n % V::kMaxMr != 0);
  if (a.n <= V::kMaxMr || wide) {
    Group<V>(src, a, 0, a.n, r0, r1, window);
    return;
  }
  constexpr int64_t kBlockBytes = 64 * 1024, kBlockUnit = 24;  // a multiple of every tile's rows
  constexpr int64_t kPass = Src::kDecodeCost >= 2 && V::kWideMr > V::kMaxMr ? V::kWideMr : V::kMaxMr;
  const int64_t block = std::max<int64_t>(kBlockUnit, kBlockBytes / src.RowBytes() / kBlockUnit * kBlockUnit);
  // Passes of equal size (n = 17: 6 + 6 + 5, not 8 + 8 + 1, whose lone row decodes for itself).
  const int64_t groups = (a.n + kPass - 1) / kPass, per = (a.n + groups - 1) / groups;
  const int64_t passes = (r1 - r0 + block - 1) / block * groups;
  const uintptr_t bytes = window.end > window.next ? window.end - window.next : 0;
  int64_t pass = 0;
  for (int64_t b0 = r0; b0 < r1; b0 += block) {
    const int64_t b1 = std::min(r1, b0 + block);
    for (int64_t i = 0; i < a.n; i += per, ++pass) {
      PrefetchSpan share{window.next + bytes * pass / passes, window.next + bytes * (pass + 1) / passes};
      if constexpr (Src::kStepBytes > 0) {
        // Streamed weights: the passes after the first read the block from L2 and leave the
        // memory idle, so the second requests the next block.
        if (i == per) share = NextBlock(src, b1, std::min(r1, b1 + block));
      }
      Group<V>(src, a, i, std::min(a.n - i, per), b0, b1, share);
    }
  }
}

}  // namespace flashserve::kernels::internal::gemm
