// Overlap of JSON Schema branches (grammar/json_overlap.h).
#include "grammar/json_overlap.h"

#include <algorithm>
#include <cmath>

namespace flashserve::grammar {
namespace {

using Json = nlohmann::json;

bool TypesMeet(const std::string& a, const std::string& b) {
  return a == b || (a == "integer" && b == "number") || (a == "number" && b == "integer");
}

// Whether `value` may match a branch of this shape (its other keywords are not evaluated).
bool MayHold(const Json& value, const BranchShape& shape) {
  if (shape.values) return std::find(shape.values->begin(), shape.values->end(), value) != shape.values->end();
  if (shape.types.empty()) return true;
  const std::string type = JsonTypeOf(value);
  return std::any_of(shape.types.begin(), shape.types.end(), [&](const std::string& t) { return t == type || (t == "number" && type == "integer"); });
}

bool ShareAValue(const std::vector<Json>& a, const std::vector<Json>& b) {
  return std::any_of(a.begin(), a.end(), [&](const Json& v) { return std::find(b.begin(), b.end(), v) != b.end(); });
}

}  // namespace

Json Unordered(const nlohmann::ordered_json& value) { return Json::parse(value.dump()); }

std::vector<Json> UnorderedList(const nlohmann::ordered_json& values) {
  std::vector<Json> out;
  for (const auto& v : values) out.push_back(Unordered(v));
  return out;
}

std::string JsonTypeOf(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      return std::isfinite(d) && d == std::floor(d) ? "integer" : "number";
    }
    default: return "unknown";
  }
}

bool MayOverlap(const BranchShape& a, const BranchShape& b) {
  if (a.values) return std::any_of(a.values->begin(), a.values->end(), [&](const Json& v) { return MayHold(v, b); });
  if (b.values) return std::any_of(b.values->begin(), b.values->end(), [&](const Json& v) { return MayHold(v, a); });
  if (a.types.empty() || b.types.empty()) return true;
  bool objects_only = true, meet = false;
  for (const std::string& ta : a.types) {
    for (const std::string& tb : b.types) {
      if (!TypesMeet(ta, tb)) continue;
      meet = true;
      objects_only &= ta == "object";
    }
  }
  if (!meet) return false;
  if (!objects_only) return true;
  for (const auto& [name, values] : a.tags) {  // a tagged union: one required property, distinct constants
    if (auto it = b.tags.find(name); it != b.tags.end() && !ShareAValue(values, it->second)) return false;
  }
  return true;
}

}  // namespace flashserve::grammar
