// Reading request JSON with the field's path in every error ("messages[2].content[0].type: ..."):
// what the dialect request parsers share. Pure functions, any thread; no exceptions.
#pragma once

#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dialect/request_options.h"
#include "net/api_error.h"

namespace flashserve::dialect::json_fields {

using Json = nlohmann::ordered_json;
using Error = std::optional<net::ApiError>;

inline net::ApiError Bad(const std::string& path, const std::string& what) {
  return net::InvalidRequest(path + ": " + what, path);
}

inline net::ApiError WrongType(const std::string& path, const char* expected, const Json& got) {
  return Bad(path, fmt::format("expected {}, got {}", expected, JsonTypeName(got)));
}

// The value under `key`; nullptr when absent or null.
inline const Json* Find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A string field into *out (left unchanged when absent and not required).
inline Error String(const Json& object, const char* key, const std::string& path, std::string* out,
                    bool required = true) {
  const Json* v = Find(object, key);
  if (v == nullptr) return required ? Error(Bad(path + "." + key, "missing (a string is required)")) : std::nullopt;
  if (!v->is_string()) return WrongType(path + "." + key, "a string", *v);
  *out = v->get<std::string>();
  return std::nullopt;
}

// An optional array field: *out is null when absent, else the array.
inline Error ArrayField(const Json& object, const char* key, const std::string& path, const Json** out) {
  *out = Find(object, key);
  if (*out != nullptr && !(*out)->is_array()) return WrongType(path.empty() ? key : path + "." + key, "an array", **out);
  return std::nullopt;
}

// Element i of a list of typed objects (blocks, items, parts): its path and its "type".
inline Error TypedElement(const Json& list, size_t i, const std::string& list_path, const char* what,
                          std::string* path, std::string* type) {
  *path = fmt::format("{}[{}]", list_path, i);
  if (!list[i].is_object()) return WrongType(*path, what, list[i]);
  return String(list[i], "type", *path, type);
}

}  // namespace flashserve::dialect::json_fields
