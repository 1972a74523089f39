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

struct BranchShape {
  std::vector<std::string> types;  // JSON Schema type names; empty: any value
  std::optional<std::vector<nlohmann::ordered_json>> values;  // a `const` or an `enum`
  std::map<std::string, std::vector<nlohmann::ordered_json>> tags;  // required property -> its constants
};

// The type name of a value ("integer" for integral numbers).
std::string JsonTypeOf(const nlohmann::ordered_json& value);
// False only when no value can match both.
bool MayOverlap(const BranchShape& a, const BranchShape& b);

}  // namespace flashserve::grammar
