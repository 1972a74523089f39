// Typed, validated lookups of single tensors in a Checkpoint (used by LoadModelWeights):
// each call checks presence, dtype and shape and names the tensor in any error.
// Not thread-safe (records which tensors were read).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/matrix.h"
#include "model/safetensors.h"

namespace flashserve::model {

// Which storage formats a linear may use.
enum class LinearKind {
  kFloatOnly,   // BF16/F16/F32 by spec (compressor, gate, weights_proj, embed, head)
  kDense,       // FP8 with tile scales, or float
  kExpert,      // FP4 (packed, per-32 scales), FP8 or float
  kRowTable,    // FP8 with one scale per 32 columns of each row (V4.1 Engram tables), or float
};

class WeightReader {
 public:
  WeightReader(const Checkpoint& ckpt, int fp8_block) : ckpt_(ckpt), fp8_block_(fp8_block) {}

  base::Result<Matrix> Linear(const std::string& prefix, int64_t rows, int64_t cols, LinearKind kind);
  base::Result<std::vector<float>> Floats(const std::string& name, std::vector<int64_t> shape);
  base::Result<std::vector<int32_t>> Ints(const std::string& name, std::vector<int64_t> shape,
                                          int64_t min_value, int64_t max_value_exclusive);
  bool Has(const std::string& name) const { return ckpt_.Find(name) != nullptr; }
  const std::set<std::string>& used() const { return used_; }

 private:
  base::Result<const TensorInfo*> Get(const std::string& name);
  base::Result<Matrix> Fp8(const TensorInfo& w, int64_t rows, int64_t cols, bool row_scaled);
  base::Result<Matrix> Fp4(const TensorInfo& w, int64_t rows, int64_t cols);

  const Checkpoint& ckpt_;
  int fp8_block_;
  std::set<std::string> used_;
};

}  // namespace flashserve::model
