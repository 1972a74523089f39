// JSON text exactly as Python's `json.dumps(value, ensure_ascii=False)` writes it (", " and ": "
// separators, insertion key order, repr() floats) and `json.loads` acceptance rules. Callers:
// the encoders (tool schemas, response formats, non-string tool arguments) and the output
// parser (tool-call arguments). Pure functions, any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace flashserve::encoding {

// json.dumps(value, ensure_ascii=False). Integers outside the 64-bit range cannot occur here:
// the JSON parser has already turned them into doubles.
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

// Appends json.dumps(text, ensure_ascii=False) of a string: quotes, \" \\ \n \r \t \b \f, other
// control characters as \u00XX, everything else (including non-ASCII) as is.
void AppendPythonJsonString(std::string_view text, std::string* out);

// Python's repr(float): shortest round-trip digits, exponent form when the decimal exponent is
// below -4 or at least 16 (`1e-05`, `1e+16`), otherwise fixed with at least one fractional digit
// (`10000.0`); NaN and infinities as json.dumps writes them (`NaN`, `Infinity`, `-Infinity`).
std::string PythonFloatRepr(double value);

// json.loads(text): nullopt where Python raises (malformed JSON, a leading byte-order mark).
std::optional<nlohmann::ordered_json> PythonJsonLoads(std::string_view text);

}  // namespace flashserve::encoding
