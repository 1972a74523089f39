// JSON Schemas from requests (response_format, tool parameters) through the grammar compiler:
// any JSON either compiles or is refused with an error, never a crash, an exception, a hang or
// unbounded memory ($ref cycles, deep nesting, huge bounds).
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto schema = nlohmann::ordered_json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto grammar = flashserve::grammar::JsonSchemaGrammar(schema);
  if (!grammar.ok()) (void)flashserve::grammar::SchemaErrorPath(grammar.error());
  return 0;
}
