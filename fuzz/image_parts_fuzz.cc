// Request bodies (any JSON, any shape) through the walk that finds pictures in every dialect:
// the sources found are the body's own strings, and writing them back keeps the body valid.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "protocol/image_parts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  const std::vector<std::string> sources = flashserve::protocol::ImageSources(body);
  std::vector<flashserve::protocol::ImageSourceField> fields = flashserve::protocol::ImageSourceFields(body);
  if (fields.size() != sources.size()) __builtin_trap();
  for (auto& field : fields) {
    if (!field.value->is_string() || field.path.empty()) __builtin_trap();
    *field.value = "data:image/png;base64,AAAA";
  }
  (void)body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return 0;
}
