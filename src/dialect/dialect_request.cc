// What the dialect request parsers share (dialect/dialect_request.h).
#include "dialect/dialect_request.h"

#include <algorithm>

#include <fmt/format.h>

namespace flashserve::dialect {

net::ApiError Unsupported(const std::string& name, const std::string& what) {
  return net::InvalidRequest(name + ": " + what, name, "unsupported_parameter");
}

namespace {

std::optional<net::ApiError> FirstUnknown(const nlohmann::ordered_json& object, std::string_view path,
                                          std::span<const std::string_view> implemented,
                                          std::span<const std::string_view> hints) {
  if (!object.is_object()) return std::nullopt;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    const auto known = [&key](std::string_view k) { return k == key; };
    if (std::any_of(implemented.begin(), implemented.end(), known) || std::any_of(hints.begin(), hints.end(), known))
      continue;
    const std::string name = path.empty() ? key : fmt::format("{}.{}", path, key);
    return Unsupported(name, "this server does not support this parameter (see docs/api.md for what each route accepts)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<net::ApiError> CheckKnownFields(const nlohmann::ordered_json& object, std::string_view path,
                                              std::initializer_list<std::string_view> implemented,
                                              std::initializer_list<std::string_view> hints) {
  return FirstUnknown(object, path, std::span(implemented.begin(), implemented.size()),
                      std::span(hints.begin(), hints.size()));
}

std::optional<net::ApiError> CheckKnownFields(const nlohmann::ordered_json& object, const FieldList& fields) {
  return FirstUnknown(object, "", fields.implemented, fields.hints);
}

std::optional<net::ApiError> ParseDialectGeneration(const nlohmann::ordered_json& body,
                                                    std::initializer_list<FieldName> fields, int64_t vocab_size,
                                                    GenerationOptions* out) {
  nlohmann::ordered_json chat = nlohmann::ordered_json::object();
  for (const auto& [name, chat_name] : fields)
    if (body.contains(name)) chat[chat_name] = body[name];
  std::optional<net::ApiError> e = ParseGenerationOptions(chat, Dialect::kChat, vocab_size, out);
  if (!e) return e;
  for (const auto& [name, chat_name] : fields) {
    if (e->param != chat_name || std::string_view(name) == chat_name) continue;
    if (e->message.rfind(chat_name, 0) == 0) e->message.replace(0, e->param.size(), name);
    e->param = name;
    break;
  }
  return e;
}

std::optional<std::string> MapEffortName(std::string_view name, encoding::EncodingVersion version) {
  const bool v41 = version == encoding::EncodingVersion::kV41;
  if (name == "minimal" || name == "low") return std::string(v41 ? "low" : "high");
  if (name == "medium" || name == "high") return std::string("high");
  if (name == "xhigh") return std::string(v41 ? "high" : "max");
  if (name == "max") return std::string("max");
  return std::nullopt;
}

void FlattenTextParts(protocol::ChatRequest& chat, encoding::EncodingVersion version) {
  if (version != encoding::EncodingVersion::kV4) return;
  for (protocol::ChatMessage& m : chat.messages) {
    if (m.content.kind != protocol::ContentKind::kParts || m.role == protocol::Role::kTool) continue;
    const auto& parts = m.content.parts;
    if (parts.empty() || !std::all_of(parts.begin(), parts.end(), [](const protocol::ContentPart& p) {
          return p.type == protocol::PartType::kText;
        }))
      continue;
    std::string text;
    for (size_t i = 0; i < parts.size(); ++i) text += (i > 0 ? "\n\n" : "") + parts[i].text;
    m.content.kind = protocol::ContentKind::kText;
    m.content.text = std::move(text);
    m.content.parts.clear();
  }
}

}  // namespace flashserve::dialect
