// Engine options chosen at construction (validated by the caller that builds them).
#pragma once

#include <string>

namespace flashserve::engine {

struct EngineOptions {
  // Quantization-aware-training emulation: FP8 activation quantization before FP8/FP4 GEMMs,
  // FP8 round trip of raw and compressed KV, Hadamard + FP4 for the indexer, and the output
  // head's input rounded to BF16 as REF casts it (on by default).
  bool qat = true;
  // Use the naive reference kernels (fp64 accumulation, one thread) instead of the optimized ones.
  bool reference_kernels = false;
  // Worker threads including the caller; 0 = all hardware threads.
  int num_threads = 0;
  // Time each forward phase (OpStats::phase_seconds); small overhead, for benchmarks.
  bool profile = false;
  // Model loading (app::LoadModelOrPrint): copy the output head into 2 MiB pages (ModelLoadOptions).
  bool head_in_huge_pages = true;
  // Model loading: read the whole checkpoint into memory, in 2 MiB pages (ModelLoadOptions).
  bool preload_weights = true;
  // Model loading: FP4 experts repacked for the AVX-512 decoders (ModelLoadOptions).
  bool fp4_lane_pairs = true;
  // Model loading: keep the repacked matrices in a packed weights file (ModelLoadOptions::packed_dir)
  // in packed_weights_dir (empty: app::DefaultPackedWeightsDir), or repack them in memory at
  // every start (false).
  bool packed_weights_file = true;
  std::string packed_weights_dir;
  // FP4/FP8 products on AMX tiles where the CPU has them (kernels::SetAmx, process-wide, applied
  // by app::LoadModelOrPrint): faster, batch-invariant, but not the AVX-512 paths' bits.
  bool amx = true;
};

}  // namespace flashserve::engine
