// Instruction sets the CPU kernels are built for and the run-time choice among them. Called by
// the kernel dispatchers (gemm, roofline, attention, norm) and their tests; safe from any
// thread. The choice is made once per process, so one process uses one ISA; likewise
// SubnormalOperandsAreSlow times its probe once, on the first caller's thread (a static).
#pragma once

namespace flashserve::kernels {

// Ordered from least to most capable.
enum class Isa { kGeneric, kAvx2, kAvx512 };

// Whether this CPU can run kernels built for isa (kGeneric: always).
bool IsaSupported(Isa isa);

// The most capable supported ISA; computed on first use, then fixed for the process.
Isa BestIsa();

// "generic", "avx2" or "avx512".
const char* IsaName(Isa isa);

// Whether the CPU has AVX512-BF16 (VDPBF16PS) and AVX512-VBMI (the FP4 decoder's
// VPMULTISHIFTQB) on top of kAvx512 (Zen 4, Sapphire Rapids and later; not Cooper Lake). The
// matrix products use them only where they give the same bits as the f32 paths
// (kernels/gemm/matmul_internal.h).
bool Avx512Bf16Supported();

// Whether the CPU has AMX tiles with BF16 products (TDPBF16PS; Sapphire Rapids and later) on
// top of Avx512Bf16Supported(), and the kernel lets this process use them (Linux grants the
// tile registers' state per process on request: ARCH_REQ_XCOMP_PERM, made here, once).
bool AmxSupported();

// Whether arithmetic on subnormal operands is much slower here than on normal ones (Intel
// cores take a microcode assist per such instruction unless MXCSR flushes them: FP8 products
// decoded into f32 subnormals ran many times slower on random codes, 5% of them e4m3 subnormals;
// AMD's run them at full speed). Measured once per process with MXCSR's flush bits
// cleared, by timing a chain of dependent multiplies on each.
bool SubnormalOperandsAreSlow();

}  // namespace flashserve::kernels
