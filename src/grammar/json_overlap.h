// Whether two JSON Schema branches can accept one value, decided only where it is plain: their
// JSON types, their constants, and a required property holding constants (a tagged union).
// `oneOf` is enforced exactly when its branches are shown disjoint this way. Pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashserve::grammar {

// Values are held as nlohmann::json, whose objects compare whatever their key order.
struct BranchShape {
  std::vector<std::string> types;  // the written `type` (with `nullable`); empty: any value
  std::optional<std::vector<nlohmann::json>> values;  // a `const` or an `enum`
  std::map<std::string, std::vector<nlohmann::json>> tags;  // required property -> its constants
};

// The type name of a value ("integer" for integral numbers).
std::string JsonTypeOf(const nlohmann::json& value);
// A value or a list of values, as nlohmann::json (object members in any order compare equal).
nlohmann::json Unordered(const nlohmann::ordered_json& value);
std::vector<nlohmann::json> UnorderedList(const nlohmann::ordered_json& values);
// False only when no value can match both.
bool MayOverlap(const BranchShape& a, const BranchShape& b);

}  // namespace flashserve::grammar
