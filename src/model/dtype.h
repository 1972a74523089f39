// Element types of safetensors checkpoints: names as written in the header, element sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace flashserve::model {

enum class DType : uint8_t {
  kF64, kF32, kF16, kBF16, kF8E4M3, kF8E8M0, kI64, kI32, kI16, kI8, kU8, kBool,
};

std::string_view DTypeName(DType dtype);  // "F32", "BF16", "F8_E4M3", ...
std::optional<DType> ParseDType(std::string_view name);
int DTypeSize(DType dtype);  // bytes per element

}  // namespace flashserve::model
