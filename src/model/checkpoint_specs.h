// The tensor list of a DeepSeek-V4 checkpoint derived from its config (official names,
// logical shapes, storage role and the init scale used for random weights). Used by the
// random checkpoint writer; the loader (weights.cc) checks the same names independently and
// a test asserts the two agree. Pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace flashserve::model {

enum class TensorRole {
  kDenseLinear,   // FP8 (+scale) or BF16
  kExpertLinear,  // FP4 (+scale), FP8 or BF16
  kFloatLinear,   // BF16 by spec
  kNormWeight,    // BF16 vector, initialised near 1
  kF32,           // F32 (mHC, sinks, ape, biases); init std, or uniform [0.5, 1.5) when std < 0
  kTid2eid,       // I64 [vocab, k]
  kEngramTable,   // V4.1 Engram rows: FP8 with one ue8m0 scale per 32 columns of a row, or BF16
};

struct TensorSpec {
  std::string name;  // linears: prefix without ".weight"
  TensorRole role;
  std::vector<int64_t> shape;  // logical (linears: [out, in])
  float init_std = 0.0f;
};

std::vector<TensorSpec> CheckpointTensorSpecs(const ModelConfig& config, float sharp);

// Position of `layer` in config.engram.layer_ids, or -1.
int EngramIndex(const ModelConfig& config, int layer);

}  // namespace flashserve::model
