// Structured-output request fields (api/constraint_fields.h).
#include "api/constraint_fields.h"

#include <fmt/format.h>

#include "encoding/dsml.h"
#include "encoding/prompt.h"
#include "grammar/json_schema.h"

namespace flashserve::api {
namespace {

using Json = nlohmann::ordered_json;
using protocol::ConstraintKind;

const Json* Find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

net::ApiError Bad(const std::string& param, const std::string& what) {
  return net::InvalidRequest(fmt::format("{}: {}", param, what), param);
}

// A schema given as an object or as JSON text.
std::optional<net::ApiError> SchemaText(const Json& value, const std::string& param, std::string* out) {
  if (value.is_object() || value.is_boolean()) {
    *out = value.dump();
    return std::nullopt;
  }
  if (value.is_string()) {
    const Json parsed = Json::parse(value.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean())) return Bad(param, "not a JSON schema (expected an object)");
    *out = parsed.dump();
    return std::nullopt;
  }
  return Bad(param, "expected a JSON schema object");
}

std::optional<net::ApiError> StringField(const Json& value, const std::string& param, std::string* out) {
  if (!value.is_string() || value.get<std::string>().empty()) return Bad(param, "expected a non-empty string");
  *out = value.get<std::string>();
  return std::nullopt;
}

std::optional<net::ApiError> ChoiceList(const Json& value, const std::string& param, std::string* out) {
  if (!value.is_array() || value.empty()) return Bad(param, "expected a non-empty array of strings");
  for (const Json& c : value) {
    if (!c.is_string()) return Bad(param, "expected a non-empty array of strings");
  }
  *out = value.dump();
  return std::nullopt;
}

// One source field -> a constraint.
std::optional<net::ApiError> ReadOne(const std::string& field, const Json& value, ConstraintSource* out) {
  ConstraintSource& c = *out;
  c.param = field;
  if (field == "guided_json" || field == "json_schema" || field == "structured_outputs.json") {
    c.constraint.kind = ConstraintKind::kJsonSchema;
    return SchemaText(value, field, &c.constraint.text);
  }
  if (field == "guided_regex" || field == "regex" || field == "structured_outputs.regex") {
    c.constraint.kind = ConstraintKind::kRegex;
    return StringField(value, field, &c.constraint.text);
  }
  if (field == "guided_choice" || field == "structured_outputs.choice") {
    c.constraint.kind = ConstraintKind::kChoice;
    return ChoiceList(value, field, &c.constraint.text);
  }
  if (field == "guided_grammar" || field == "ebnf" || field == "structured_outputs.grammar") {
    c.constraint.kind = ConstraintKind::kGrammar;
    return StringField(value, field, &c.constraint.text);
  }
  if (field == "structured_outputs.json_object") {
    if (!value.is_boolean()) return Bad(field, "expected a boolean");
    if (value.get<bool>()) c.constraint.kind = ConstraintKind::kJsonObject;
    return std::nullopt;
  }
  return Bad(field, "is not a structured-output field this server enforces");
}

}  // namespace

void ConstraintFromResponseFormat(const Json& format, const std::string& schema_param, ConstraintSource* out) {
  if (!format.is_object()) return;
  const Json* type = Find(format, "type");
  if (type == nullptr || !type->is_string()) return;
  if (*type == "json_object") {
    out->constraint = {ConstraintKind::kJsonObject, ""};
    out->param = schema_param;
  } else if (*type == "json_schema") {
    const Json* spec = Find(format, "json_schema");
    const Json* schema = spec != nullptr && spec->is_object() ? Find(*spec, "schema") : nullptr;
    out->constraint = {ConstraintKind::kJsonSchema, schema != nullptr ? schema->dump() : "{}"};
    out->param = schema_param;
  }
}

std::optional<net::ApiError> ReadConstraintFields(const Json& body, bool chat, ConstraintSource* out) {
  std::vector<std::pair<std::string, const Json*>> found;
  for (const char* f : {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "regex", "ebnf", "json_schema"}) {
    if (const Json* v = Find(body, f)) found.emplace_back(f, v);
  }
  if (const Json* so = Find(body, "structured_outputs")) {
    if (!so->is_object()) return Bad("structured_outputs", "expected an object");
    for (const auto& [key, value] : so->items()) {
      if (value.is_null() || (key == "json_object" && value == false)) continue;
      found.emplace_back("structured_outputs." + key, &value);
    }
  }
  if (chat) {
    if (const Json* format = Find(body, "response_format"); format != nullptr && format->is_object()) {
      const Json* type = Find(*format, "type");
      if (type != nullptr && *type != "text") found.emplace_back("response_format", format);
    }
  }
  if (found.empty()) return std::nullopt;
  if (found.size() > 1) {
    return Bad(found[1].first, fmt::format("only one structured-output constraint per request (`{}` is set too)", found[0].first));
  }
  if (found[0].first == "response_format") {
    ConstraintFromResponseFormat(*found[0].second, "response_format.json_schema.schema", out);
    if ((*found[0].second)["type"] == "json_object") out->param = "response_format";
    return std::nullopt;
  }
  return ReadOne(found[0].first, *found[0].second, out);
}

// A tool's `strict` flag (the decoder admits a boolean or null only).
bool Strict(const Json& function) {
  const auto it = function.find("strict");
  return it != function.end() && it->is_boolean() && it->get<bool>();
}

std::optional<net::ApiError> ToolCallConstraint(const protocol::ChatRequest& chat, encoding::EncodingVersion version,
                                                ConstraintSource* out) {
  using protocol::ToolChoiceMode;
  const protocol::ToolChoice& choice = chat.tool_choice;
  const bool forced = choice.mode == ToolChoiceMode::kRequired || choice.mode == ToolChoiceMode::kFunction;
  if (forced && chat.tools.empty()) return Bad("tool_choice", "forces a tool call, but the request has no tools");
  if (chat.tools.empty() || choice.mode == ToolChoiceMode::kNone) return std::nullopt;
  bool strict = false;
  for (const protocol::ToolSpec& t : chat.tools) strict = strict || Strict(t.function);
  if (!forced && chat.parallel_tool_calls && !strict) return std::nullopt;
  if (out->constraint.active()) {
    return Bad("tools", fmt::format("forced or strict tool calls and `{}` cannot both constrain one answer", out->param));
  }
  Json tools = Json::array();
  for (size_t i = 0; i < chat.tools.size(); ++i) {
    const protocol::ToolSpec& t = chat.tools[i];
    if (choice.mode == ToolChoiceMode::kFunction && t.name != choice.function_name) continue;
    std::string name = t.name;
    if (t.tool_namespace.is_object() && t.tool_namespace.contains("name")) {
      const std::string ns = t.tool_namespace["name"].get<std::string>() + "::";
      if (name.rfind(ns, 0) != 0) name = ns + name;
    }
    tools.push_back({{"name", name}, {"strict", Strict(t.function)},
                     {"parameters", t.function.value("parameters", Json::object())}});
  }
  if (tools.empty()) return Bad("tool_choice", fmt::format("names '{}', which is not among the tools", choice.function_name));
  const encoding::DsmlTags tags = encoding::TagsFor(version);
  const Json spec = {{"mode", forced ? "required" : "auto"}, {"parallel", chat.parallel_tool_calls},
                     {"dsml", std::string(encoding::kDsmlToken)},
                     {"tags", {{"block", tags.block}, {"invoke", tags.invoke}, {"parameter", tags.parameter}}},
                     {"tools", std::move(tools)}};
  out->constraint = {ConstraintKind::kToolCalls, spec.dump()};
  out->param = "tools";
  return std::nullopt;
}

std::optional<net::ApiError> CheckConstraint(grammar::GrammarCache* cache, const ConstraintSource& source) {
  if (!source.constraint.active()) return std::nullopt;
  if (cache == nullptr) {
    return net::InvalidRequest(fmt::format("{}: structured outputs are not available on this worker", source.param),
                               source.param, "unsupported_parameter");
  }
  auto compiled = cache->Get(source.constraint);
  if (compiled.ok()) return std::nullopt;
  const std::string path = grammar::SchemaErrorPath(compiled.error());
  if (source.constraint.kind == ConstraintKind::kJsonSchema && !path.empty()) {
    const std::string param = source.param + "." + path;
    const std::string& message = compiled.error().message();
    return net::InvalidRequest(fmt::format("{}: {}", param, message.substr(path.size() + 2)), param);
  }
  return net::InvalidRequest(fmt::format("{}: {}", source.param, compiled.error().message()), source.param);
}

}  // namespace flashserve::api
