// Python-compatible JSON serialisation (encoding/python_json.h).
#include "encoding/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "base/check.h"

namespace flashserve::encoding {
namespace {

using Json = nlohmann::ordered_json;

void Dump(const Json& value, std::string* out) {
  switch (value.type()) {
    case Json::value_t::null:
      *out += "null";
      return;
    case Json::value_t::boolean:
      *out += value.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_integer:
      *out += std::to_string(value.get<int64_t>());
      return;
    case Json::value_t::number_unsigned:
      *out += std::to_string(value.get<uint64_t>());
      return;
    case Json::value_t::number_float:
      *out += PythonFloatRepr(value.get<double>());
      return;
    case Json::value_t::string:
      AppendPythonJsonString(value.get_ref<const std::string&>(), out);
      return;
    case Json::value_t::array: {
      *out += '[';
      bool first = true;
      for (const Json& item : value) {
        if (!first) *out += ", ";
        first = false;
        Dump(item, out);
      }
      *out += ']';
      return;
    }
    case Json::value_t::object: {
      *out += '{';
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) *out += ", ";
        first = false;
        AppendPythonJsonString(key, out);
        *out += ": ";
        Dump(item, out);
      }
      *out += '}';
      return;
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  FS_CHECK(false, "PythonJsonDumps: value of type %s has no JSON text", value.type_name());
}

}  // namespace

void AppendPythonJsonString(std::string_view text, std::string* out) {
  *out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
          *out += escape;
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

std::string PythonFloatRepr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits in the form [-]d[.ddd]e<sign><exp>.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  FS_CHECK(ec == std::errc(), "to_chars failed");
  std::string_view sci(buf, end - buf);
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+'), sci.data() + sci.size(),
                  exponent);
  const int decimal_point = exponent + 1;  // value = 0.<digits> * 10^decimal_point
  const int num_digits = static_cast<int>(digits.size());
  if (decimal_point <= -4 || decimal_point > 16) {
    out += digits[0];
    if (num_digits > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    return out + exp_text;
  }
  if (decimal_point <= 0) return out + "0." + std::string(-decimal_point, '0') + digits;
  if (decimal_point >= num_digits) {
    return out + digits + std::string(decimal_point - num_digits, '0') + ".0";
  }
  return out + digits.substr(0, decimal_point) + "." + digits.substr(decimal_point);
}

std::string PythonJsonDumps(const Json& value) {
  std::string out;
  Dump(value, &out);
  return out;
}

std::optional<Json> PythonJsonLoads(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) return std::nullopt;  // Python rejects a BOM
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

}  // namespace flashserve::encoding
