// OpenAI-style JSON -> protocol::ChatRequest (protocol/chat_json.h). Types are checked before
// every access, so no nlohmann exception is ever raised; parse errors come back through a SAX
// callback instead of an exception.
#include "protocol/chat_json.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace flashserve::protocol {
namespace {

using Json = nlohmann::ordered_json;
using base::Error;
using base::Result;
using base::Status;

Error Bad(std::string_view path, std::string_view what) {
  return base::MakeError(base::ErrorCode::kBadChatRequest, fmt::format("{}: {}", path, what));
}

Error WrongType(std::string_view path, std::string_view expected, const Json& got) {
  return Bad(path, fmt::format("expected {}, got {}", expected, got.type_name()));
}

std::string Field(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string Item(std::string_view path, size_t index) { return fmt::format("{}[{}]", path, index); }

// The value under `key`, or nullptr when the key is absent or null.
const Json* Find(const Json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::optional<std::string>> OptionalString(const Json& object, std::string_view key,
                                                  std::string_view path) {
  const Json* value = Find(object, key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return WrongType(Field(path, key), "a string", *value);
  return std::optional<std::string>(value->get_ref<const std::string&>());
}

Result<std::string> RequiredString(const Json& object, std::string_view key,
                                   std::string_view path) {
  FS_ASSIGN_OR_RETURN(std::optional<std::string> value, OptionalString(object, key, path));
  if (!value.has_value()) return Bad(Field(path, key), "missing (a string is required)");
  return std::move(*value);
}

// Python truthiness of a JSON value, as the reference encoders test image sources.
bool Truthy(const Json& value) {
  if (value.is_null()) return false;
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number()) return value.get<double>() != 0.0;
  if (value.is_string()) return !value.get_ref<const std::string&>().empty();
  return !value.empty();
}

std::string SourceText(const Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

Result<std::string> ImageSource(const Json& part, const std::string& type, std::string_view path) {
  if (type == "image_url") {
    const Json* image_url = Find(part, "image_url");
    if (image_url == nullptr) return std::string();
    if (image_url->is_string()) return image_url->get<std::string>();
    if (!image_url->is_object()) {
      return WrongType(Field(path, "image_url"), "a string or an object", *image_url);
    }
    FS_ASSIGN_OR_RETURN(std::optional<std::string> url,
                        OptionalString(*image_url, "url", Field(path, "image_url")));
    return url.value_or("");
  }
  for (std::string_view key : {"source", "url", "data"}) {  // an "image" part
    auto it = part.find(key);
    if (it != part.end() && Truthy(*it)) return SourceText(*it);
  }
  return std::string();
}

Result<ContentPart> ParsePart(const Json& part, std::string_view path) {
  if (!part.is_object()) return WrongType(path, "a content part object", part);
  ContentPart out;
  FS_ASSIGN_OR_RETURN(out.type_name, RequiredString(part, "type", path));
  if (out.type_name == "text") {
    out.type = PartType::kText;
    FS_ASSIGN_OR_RETURN(out.text, RequiredString(part, "text", path));
  } else if (out.type_name == "image_url" || out.type_name == "image") {
    out.type = PartType::kImage;
    out.field_path = std::string(path);
    FS_ASSIGN_OR_RETURN(out.image_source, ImageSource(part, out.type_name, path));
  } else {
    out.type = PartType::kOther;
  }
  return out;
}

Result<MessageContent> ParseContent(const Json& message, std::string_view path) {
  MessageContent out;
  auto it = message.find("content");
  if (it == message.end()) return out;
  const std::string content_path = Field(path, "content");
  if (it->is_null()) {
    out.kind = ContentKind::kNull;
  } else if (it->is_string()) {
    out.kind = ContentKind::kText;
    out.text = it->get<std::string>();
  } else if (it->is_array()) {
    out.kind = ContentKind::kParts;
    for (size_t i = 0; i < it->size(); ++i) {
      FS_ASSIGN_OR_RETURN(ContentPart part, ParsePart((*it)[i], Item(content_path, i)));
      out.parts.push_back(std::move(part));
    }
  } else {
    return WrongType(content_path, "a string, an array of content parts or null", *it);
  }
  return out;
}

Result<ToolCall> ParseToolCall(const Json& call, std::string_view path) {
  if (!call.is_object()) return WrongType(path, "a tool call object", call);
  ToolCall out;
  FS_ASSIGN_OR_RETURN(std::optional<std::string> id, OptionalString(call, "id", path));
  out.id = id.value_or("");
  const std::string function_path = Field(path, "function");
  const Json* function = Find(call, "function");
  if (function == nullptr) return Bad(function_path, "missing (an object is required)");
  if (!function->is_object()) return WrongType(function_path, "an object", *function);
  FS_ASSIGN_OR_RETURN(out.name, RequiredString(*function, "name", function_path));
  auto arguments = function->find("arguments");
  if (arguments == function->end()) return Bad(Field(function_path, "arguments"), "missing");
  out.arguments = *arguments;
  return out;
}

Result<ChatMessage> ParseMessage(const Json& message, std::string_view path) {
  if (!message.is_object()) return WrongType(path, "a message object", message);
  ChatMessage out;
  FS_ASSIGN_OR_RETURN(std::string role_name, RequiredString(message, "role", path));
  std::optional<Role> role = RoleFromName(role_name);
  if (!role.has_value()) {
    return Bad(Field(path, "role"), fmt::format("unknown role '{}'", role_name));
  }
  out.role = *role;
  FS_ASSIGN_OR_RETURN(out.content, ParseContent(message, path));
  FS_ASSIGN_OR_RETURN(out.reasoning_content, OptionalString(message, "reasoning_content", path));
  FS_ASSIGN_OR_RETURN(out.tool_call_id, OptionalString(message, "tool_call_id", path));
  FS_ASSIGN_OR_RETURN(out.name, OptionalString(message, "name", path));
  if (const Json* prefix = Find(message, "prefix")) {
    if (!prefix->is_boolean()) return WrongType(Field(path, "prefix"), "a boolean", *prefix);
    out.prefix = prefix->get<bool>();
  }
  if (const Json* calls = Find(message, "tool_calls")) {
    const std::string calls_path = Field(path, "tool_calls");
    if (!calls->is_array()) return WrongType(calls_path, "an array", *calls);
    for (size_t i = 0; i < calls->size(); ++i) {
      FS_ASSIGN_OR_RETURN(ToolCall call, ParseToolCall((*calls)[i], Item(calls_path, i)));
      out.tool_calls.push_back(std::move(call));
    }
  }
  return out;
}

Result<ToolSpec> ParseTool(const Json& tool, std::string_view path) {
  if (!tool.is_object()) return WrongType(path, "a tool object", tool);
  FS_ASSIGN_OR_RETURN(std::optional<std::string> type, OptionalString(tool, "type", path));
  if (type.has_value() && *type != "function") {
    return Bad(Field(path, "type"),
               fmt::format("unsupported tool type '{}' (only \"function\")", *type));
  }
  const std::string function_path = Field(path, "function");
  const Json* function = Find(tool, "function");
  if (function == nullptr) return Bad(function_path, "missing (an object is required)");
  if (!function->is_object()) return WrongType(function_path, "an object", *function);
  ToolSpec out;
  FS_ASSIGN_OR_RETURN(out.name, RequiredString(*function, "name", function_path));
  if (const Json* strict = Find(*function, "strict"); strict != nullptr && !strict->is_null() && !strict->is_boolean())
    return WrongType(Field(function_path, "strict"), "a boolean", *strict);
  out.function = *function;
  if (const Json* ns = Find(tool, "namespace")) {
    const Json* name = ns->is_object() ? Find(*ns, "name") : nullptr;
    if (name != nullptr && !name->is_string()) return WrongType(Field(Field(path, "namespace"), "name"), "a string", *name);
    out.tool_namespace = *ns;
  }
  return out;
}

Result<ToolChoice> ParseToolChoice(const Json& body, const std::vector<ToolSpec>& tools) {
  ToolChoice out;
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr) return out;
  if (choice->is_string()) {
    const std::string& mode = choice->get_ref<const std::string&>();
    if (mode == "auto") return out;
    if (mode == "none") {
      out.mode = ToolChoiceMode::kNone;
    } else if (mode == "required") {
      if (tools.empty()) return Bad("tool_choice", "\"required\" needs a non-empty tools list");
      out.mode = ToolChoiceMode::kRequired;
    } else {
      return Bad("tool_choice", fmt::format("unknown value '{}' (none, auto or required)", mode));
    }
    return out;
  }
  if (!choice->is_object()) return WrongType("tool_choice", "a string or an object", *choice);
  const Json* function = Find(*choice, "function");
  if (function == nullptr || !function->is_object()) {
    return Bad("tool_choice.function", "missing (an object with a name is required)");
  }
  FS_ASSIGN_OR_RETURN(out.function_name, RequiredString(*function, "name", "tool_choice.function"));
  out.mode = ToolChoiceMode::kFunction;
  for (const ToolSpec& tool : tools) {
    if (tool.name == out.function_name) return out;
  }
  return Bad("tool_choice.function.name",
             fmt::format("tool '{}' is not in the tools list", out.function_name));
}

Status ParseOptions(const Json& body, ChatRequest& out) {
  if (const Json* format = Find(body, "response_format")) {
    if (!format->is_object()) return WrongType("response_format", "an object", *format);
    FS_ASSIGN_OR_RETURN(std::string type, RequiredString(*format, "type", "response_format"));
    if (type != "text" && type != "json_object" && type != "json_schema") {
      return Bad("response_format.type",
                 fmt::format("unknown type '{}' (text, json_object or json_schema)", type));
    }
    if (type == "json_schema" && !format->contains("json_schema")) {
      return Bad("response_format.json_schema", "missing (required for type json_schema)");
    }
    out.response_format = *format;
  }
  if (const Json* thinking = Find(body, "thinking")) {
    if (!thinking->is_object()) return WrongType("thinking", "an object", *thinking);
    FS_ASSIGN_OR_RETURN(std::string type, RequiredString(*thinking, "type", "thinking"));
    if (type != "enabled" && type != "disabled") {
      return Bad("thinking.type", fmt::format("unknown value '{}' (enabled or disabled)", type));
    }
    out.thinking = type == "enabled";
  }
  if (const Json* effort = Find(body, "reasoning_effort")) {
    if (effort->is_string()) {
      out.reasoning_effort = effort->get<std::string>();
    } else if (effort->is_number_integer()) {
      if (effort->is_number_unsigned() &&
          effort->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Bad("reasoning_effort", "integer out of range");
      }
      out.reasoning_effort = effort->get<int64_t>();
    } else {
      return WrongType("reasoning_effort", "a string or an integer", *effort);
    }
  }
  return Status::Ok();
}

// Records the parser's error message; a SAX handler receives it without any exception.
class ParseErrorRecorder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& error) override {
    message_ = error.what();
    return false;
  }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

}  // namespace

Result<ChatRequest> ChatRequestFromJson(const Json& body) {
  if (!body.is_object()) return WrongType("request", "a JSON object", body);
  ChatRequest out;
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) return Bad("messages", "missing (an array is required)");
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  if (messages->empty()) return Bad("messages", "must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    FS_ASSIGN_OR_RETURN(ChatMessage message, ParseMessage((*messages)[i], Item("messages", i)));
    out.messages.push_back(std::move(message));
  }
  if (const Json* tools = Find(body, "tools")) {
    if (!tools->is_array()) return WrongType("tools", "an array", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      FS_ASSIGN_OR_RETURN(ToolSpec tool, ParseTool((*tools)[i], Item("tools", i)));
      out.tools.push_back(std::move(tool));
    }
  }
  FS_ASSIGN_OR_RETURN(out.tool_choice, ParseToolChoice(body, out.tools));
  FS_RETURN_IF_ERROR(ParseOptions(body, out));
  return out;
}

Result<ChatRequest> ParseChatRequest(std::string_view json_text) {
  Json body = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    ParseErrorRecorder recorder;
    Json::sax_parse(json_text, &recorder);
    std::string detail = recorder.message();
    if (size_t end = detail.find("] ");
        detail.starts_with("[json.exception") && end != std::string::npos) {
      detail.erase(0, end + 2);
    }
    return base::MakeError(base::ErrorCode::kBadChatRequest,
                           "request body is not valid JSON: " + detail);
  }
  return ChatRequestFromJson(body);
}

}  // namespace flashserve::protocol
