// Validated tensor lookups (model/weight_reader.h).
#include "model/weight_reader.h"

#include <cstring>

#include "model/number_formats.h"

namespace flashserve::model {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {
std::string ShapeString(const std::vector<int64_t>& shape) {
  TensorInfo t;
  t.shape = shape;
  return t.ShapeString();
}
Error BadTensor(const TensorInfo& t, const std::string& what) {
  return Error(ErrorCode::kBadTensor, "tensor '" + t.name + "' (" + std::string(DTypeName(t.dtype)) + " " +
                                          t.ShapeString() + " in " + t.file + "): " + what);
}
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Matrix Scaled(MatrixFormat format, int64_t rows, int64_t cols, const TensorInfo& w, const TensorInfo& s, int tile_rows,
              int tile_cols) {
  Matrix m;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.data = w.data;
  m.scale = s.data;
  m.tile_rows = tile_rows;
  m.tile_cols = tile_cols;
  m.scale_cols = s.shape[1];
  m.SetScaleRange();
  return m;
}
}  // namespace

Result<const TensorInfo*> WeightReader::Get(const std::string& name) {
  const TensorInfo* t = ckpt_.Find(name);
  if (t == nullptr) return Error(ErrorCode::kMissingTensor, "tensor '" + name + "' is missing from the checkpoint");
  used_.insert(name);
  return t;
}

Result<Matrix> WeightReader::Fp8(const TensorInfo& w, int64_t rows, int64_t cols, bool row_scaled) {
  FS_ASSIGN_OR_RETURN(const TensorInfo* s, Get(w.name.substr(0, w.name.size() - 6) + "scale"));
  if (s->dtype != DType::kF8E8M0 || s->shape.size() != 2)
    return BadTensor(*s, "FP8 weight scale must be a 2-D F8_E8M0 tensor");
  if (row_scaled) {
    if (cols % 32 != 0 || s->shape != std::vector<int64_t>{rows, cols / 32})
      return BadTensor(*s, "row-scaled FP8 table needs scales of shape " + ShapeString({rows, cols / 32}));
    return Scaled(MatrixFormat::kFp8, rows, cols, w, *s, 1, 32);
  }
  // The tile edge follows from the scale shape; the configured block first, then 128 / 32.
  for (int block : {fp8_block_, 128, 32}) {
    if (block <= 0 || s->shape[0] != CeilDiv(rows, block) || s->shape[1] != CeilDiv(cols, block)) continue;
    return Scaled(MatrixFormat::kFp8, rows, cols, w, *s, block, block);
  }
  return BadTensor(*s, "scale shape does not tile " + ShapeString({rows, cols}) + " in " +
                           std::to_string(fp8_block_) + "x" + std::to_string(fp8_block_) + " (or 128/32) blocks");
}

Result<Matrix> WeightReader::Fp4(const TensorInfo& w, int64_t rows, int64_t cols) {
  if (cols % 32 != 0) return BadTensor(w, "FP4 input dim " + std::to_string(cols) + " is not a multiple of 32");
  if (w.shape != std::vector<int64_t>{rows, cols / 2})
    return BadTensor(w, "packed FP4 weight must have shape " + ShapeString({rows, cols / 2}));
  FS_ASSIGN_OR_RETURN(const TensorInfo* s, Get(w.name.substr(0, w.name.size() - 6) + "scale"));
  if (s->dtype != DType::kF8E8M0 || s->shape != std::vector<int64_t>{rows, cols / 32})
    return BadTensor(*s, "FP4 scale must be F8_E8M0 " + ShapeString({rows, cols / 32}));
  return Scaled(MatrixFormat::kFp4, rows, cols, w, *s, 1, 32);
}

Result<Matrix> WeightReader::Linear(const std::string& prefix, int64_t rows, int64_t cols, LinearKind kind) {
  FS_ASSIGN_OR_RETURN(const TensorInfo* w, Get(prefix + ".weight"));
  if ((w->dtype == DType::kI8 || w->dtype == DType::kU8) && kind == LinearKind::kExpert) return Fp4(*w, rows, cols);
  bool is_float = w->dtype == DType::kF32 || w->dtype == DType::kBF16 || w->dtype == DType::kF16;
  bool is_fp8 = w->dtype == DType::kF8E4M3 && kind != LinearKind::kFloatOnly;
  if (!is_float && !is_fp8) {
    std::string allowed = kind == LinearKind::kFloatOnly ? "BF16/F16/F32"
                          : kind == LinearKind::kExpert  ? "packed FP4 I8/U8 (+scale), F8_E4M3 or BF16/F16/F32"
                                                         : "F8_E4M3 (+scale) or BF16/F16/F32";
    return BadTensor(*w, "dtype not allowed here (expected " + allowed + ")");
  }
  if (w->shape != std::vector<int64_t>{rows, cols}) return BadTensor(*w, "expected shape " + ShapeString({rows, cols}));
  if (is_fp8) return Fp8(*w, rows, cols, kind == LinearKind::kRowTable);
  Matrix m;
  m.format = w->dtype == DType::kF32 ? MatrixFormat::kF32 : w->dtype == DType::kBF16 ? MatrixFormat::kBF16 : MatrixFormat::kF16;
  m.rows = rows;
  m.cols = cols;
  m.data = w->data;
  return m;
}

Result<std::vector<float>> WeightReader::Floats(const std::string& name, std::vector<int64_t> shape) {
  FS_ASSIGN_OR_RETURN(const TensorInfo* t, Get(name));
  if (t->shape != shape) return BadTensor(*t, "expected shape " + ShapeString(shape));
  std::vector<float> out(static_cast<size_t>(t->NumElements()));
  // A safetensors payload need not be aligned to its element size: read elements by copy.
  const auto* bytes = reinterpret_cast<const unsigned char*>(t->data);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t half = 0;
    switch (t->dtype) {
      case DType::kF32: std::memcpy(&out[i], bytes + 4 * i, 4); break;
      case DType::kBF16: std::memcpy(&half, bytes + 2 * i, 2); out[i] = Bf16ToFloat(half); break;
      case DType::kF16: std::memcpy(&half, bytes + 2 * i, 2); out[i] = F16ToFloat(half); break;
      default: return BadTensor(*t, "expected a float tensor (F32/BF16/F16)");
    }
  }
  return out;
}

Result<std::vector<int32_t>> WeightReader::Ints(const std::string& name, std::vector<int64_t> shape,
                                                int64_t min_value, int64_t max_value_exclusive) {
  FS_ASSIGN_OR_RETURN(const TensorInfo* t, Get(name));
  if (t->shape != shape) return BadTensor(*t, "expected shape " + ShapeString(shape));
  if (t->dtype != DType::kI64 && t->dtype != DType::kI32) return BadTensor(*t, "expected I64 or I32");
  std::vector<int32_t> out(static_cast<size_t>(t->NumElements()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v = 0;
    if (t->dtype == DType::kI64) {
      std::memcpy(&v, reinterpret_cast<const unsigned char*>(t->data) + 8 * i, 8);
    } else {
      int32_t narrow = 0;
      std::memcpy(&narrow, reinterpret_cast<const unsigned char*>(t->data) + 4 * i, 4);
      v = narrow;
    }
    if (v < min_value || v >= max_value_exclusive)
      return BadTensor(*t, "value " + std::to_string(v) + " at index " + std::to_string(i) + " outside [" +
                               std::to_string(min_value) + ", " + std::to_string(max_value_exclusive) + ")");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

}  // namespace flashserve::model
