// A checkpoint's config.json through the parser and the validation a model load runs: a
// config that parses and validates is written back and parses again to the same JSON.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace model = flashserve::model;
  auto config = model::ParseModelConfig(std::string(reinterpret_cast<const char*>(data), size));
  if (!config.ok()) return 0;
  if (!model::ValidateModelConfig(config.value()).ok()) return 0;
  if (config.value().is_v41() && !model::ValidateV41Config(config.value()).ok()) return 0;
  const std::string written = model::ModelConfigToJson(config.value());
  auto again = model::ParseModelConfig(written);
  if (!again.ok() || model::ModelConfigToJson(again.value()) != written) __builtin_trap();
  return 0;
}
