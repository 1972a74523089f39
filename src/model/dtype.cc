// DType names and sizes (model/dtype.h).
#include "model/dtype.h"

#include <array>
#include <utility>

namespace flashserve::model {
namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int size;
};
constexpr std::array<DTypeInfo, 12> kInfos = {{
    {DType::kF64, "F64", 8}, {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E8M0, "F8_E8M0", 1},
    {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4}, {DType::kI16, "I16", 2},
    {DType::kI8, "I8", 1}, {DType::kU8, "U8", 1}, {DType::kBool, "BOOL", 1},
}};
}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const auto& info : kInfos)
    if (info.dtype == dtype) return info.name;
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (const auto& info : kInfos)
    if (info.name == name) return info.dtype;
  return std::nullopt;
}

int DTypeSize(DType dtype) {
  for (const auto& info : kInfos)
    if (info.dtype == dtype) return info.size;
  return 0;
}

}  // namespace flashserve::model
