// Anthropic Messages body -> DialectRequest (dialect/dialect_request.h): system, content blocks,
// tools (deferred and hosted), tool_choice, thinking, output_config, context_management.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "dialect/dialect_request.h"
#include "dialect/json_fields.h"

namespace flashserve::dialect {
namespace {

using namespace json_fields;  // NOLINT: the room's small JSON reading vocabulary
using protocol::ChatMessage;
using protocol::ContentKind;
using protocol::Role;

Error CheckCitations(const Json& block, const std::string& path) {
  const Json* c = Find(block, "citations");
  if (c != nullptr && !(c->is_array() && c->empty())) return Unsupported(path + ".citations", "citations are not supported");
  return std::nullopt;
}

// A text block's text ({"type": "text", "text", "cache_control", "citations"}).
Error TextBlock(const Json& block, const std::string& path, std::string* text) {
  if (auto e = CheckKnownFields(block, path, {"type", "text", "citations"}, {"cache_control"})) return e;
  if (auto e = CheckCitations(block, path)) return e;
  return String(block, "text", path, text);
}

// System as a string or text blocks, joined by blank lines.
Error SystemText(const Json& value, const std::string& path, std::string* out) {
  if (value.is_string()) {
    *out = value.get<std::string>();
    return std::nullopt;
  }
  if (!value.is_array()) return WrongType(path, "a string or an array of text blocks", value);
  for (size_t i = 0; i < value.size(); ++i) {
    std::string p, type;
    if (auto e = TypedElement(value, i, path, "a text block", &p, &type)) return e;
    if (type != "text") return Bad(p + ".type", fmt::format("'{}' is not allowed here (text blocks only)", type));
    std::string text;
    if (auto e = TextBlock(value[i], p, &text)) return e;
    *out += (i > 0 ? "\n\n" : "") + text;
  }
  return std::nullopt;
}

struct Conversion {
  const DialectContext& ctx;
  DialectRequest* out;
  std::set<std::string> referenced_tools;  // tool_reference blocks: deferred tools to load
};

Error ImageBlock(const Json& block, const std::string& path, protocol::ContentPart* part);

// A tool_result block -> a tool message: its text blocks joined by blank lines; with image
// blocks (Claude Code's Read tool returns screenshots so) the message keeps text and pictures
// as parts in order, which the V4.1 encoder joins the same way with a placeholder per picture.
Error ToolResult(Conversion& cv, const Json& block, const std::string& path) {
  if (auto e = CheckKnownFields(block, path, {"type", "tool_use_id", "content", "is_error"}, {"cache_control"})) return e;
  ChatMessage m;
  m.role = Role::kTool;
  std::string id;
  if (auto e = String(block, "tool_use_id", path, &id)) return e;
  m.tool_call_id = id;
  std::string text;
  std::vector<protocol::ContentPart> parts;  // text and pictures, when a picture is among them
  const Json* content = Find(block, "content");
  if (content != nullptr && content->is_string()) {
    text = content->get<std::string>();
  } else if (content != nullptr) {
    if (!content->is_array()) return WrongType(path + ".content", "a string or an array of blocks", *content);
    bool first = true;
    for (size_t i = 0; i < content->size(); ++i) {
      std::string p, type;
      if (auto e = TypedElement(*content, i, path + ".content", "a content block", &p, &type)) return e;
      const Json& part = (*content)[i];
      if (type == "tool_reference") {
        std::string name;
        if (auto e = CheckKnownFields(part, p, {"type", "tool_name"}, {"cache_control"})) return e;
        if (auto e = String(part, "tool_name", p, &name)) return e;
        cv.referenced_tools.insert(name);
        continue;
      }
      if (type == "image") {
        protocol::ContentPart picture;
        if (auto e = ImageBlock(part, p, &picture)) return e;
        parts.push_back(std::move(picture));
        continue;
      }
      if (type != "text") return Unsupported(p, fmt::format("'{}' blocks in tool results are not supported yet", type));
      std::string piece;
      if (auto e = TextBlock(part, p, &piece)) return e;
      text += (first ? "" : "\n\n") + piece;
      first = false;
      protocol::ContentPart text_part;
      text_part.type_name = "text";
      text_part.text = std::move(piece);
      parts.push_back(std::move(text_part));
    }
  }
  const Json* is_error = Find(block, "is_error");
  if (is_error != nullptr && !is_error->is_boolean()) return WrongType(path + ".is_error", "a boolean", *is_error);
  const bool error = is_error != nullptr && is_error->get<bool>();
  const bool pictures = std::any_of(parts.begin(), parts.end(), [](const auto& x) { return x.type == protocol::PartType::kImage; });
  if (pictures) {  // "Error: " leads the first text, as it leads the joined text otherwise
    auto first_text = std::find_if(parts.begin(), parts.end(), [](const auto& x) { return x.type == protocol::PartType::kText; });
    if (error && first_text != parts.end()) first_text->text = "Error: " + first_text->text;
    if (error && first_text == parts.end()) {
      protocol::ContentPart prefix;
      prefix.type_name = "text";
      prefix.text = "Error: ";
      parts.insert(parts.begin(), std::move(prefix));
    }
    m.content.kind = ContentKind::kParts;
    m.content.parts = std::move(parts);
    cv.out->chat.messages.push_back(std::move(m));
    return std::nullopt;
  }
  if (error) text = "Error: " + text;
  m.content.kind = ContentKind::kText;
  m.content.text = std::move(text);
  cv.out->chat.messages.push_back(std::move(m));
  return std::nullopt;
}

// An image block: its source as a data URL (base64) or the URL it names (which the image
// loader accepts or refuses with its reason).
Error ImageBlock(const Json& block, const std::string& path, protocol::ContentPart* part) {
  if (auto e = CheckKnownFields(block, path, {"type", "source"}, {"cache_control"})) return e;
  const std::string sp = path + ".source";
  auto source = block.find("source");
  if (source == block.end() || !source->is_object()) return WrongType(sp, "an object", source == block.end() ? Json() : *source);
  std::string kind;
  if (auto e = String(*source, "type", sp, &kind)) return e;
  part->type = protocol::PartType::kImage;
  part->type_name = "image";
  part->field_path = path;
  if (kind == "base64") {
    if (auto e = CheckKnownFields(*source, sp, {"type", "media_type", "data"})) return e;
    std::string media, data;
    if (auto e = String(*source, "media_type", sp, &media)) return e;
    if (auto e = String(*source, "data", sp, &data)) return e;
    part->image_source = "data:" + media + ";base64," + data;
  } else if (kind == "url") {
    if (auto e = CheckKnownFields(*source, sp, {"type", "url"})) return e;
    if (auto e = String(*source, "url", sp, &part->image_source)) return e;
  } else {
    return Unsupported(sp + ".type", fmt::format("'{}' image sources are not supported (base64 and url are)", kind));
  }
  return std::nullopt;
}

Error UserMessage(Conversion& cv, const Json& content, const std::string& path) {
  ChatMessage user;
  user.role = Role::kUser;
  user.content.kind = ContentKind::kParts;
  for (size_t i = 0; i < content.size(); ++i) {
    std::string p, type;
    if (auto e = TypedElement(content, i, path, "a content block", &p, &type)) return e;
    const Json& block = content[i];
    if (type == "tool_result") {
      if (auto e = ToolResult(cv, block, p)) return e;
    } else if (type == "text") {
      protocol::ContentPart part;
      part.type_name = "text";
      if (auto e = TextBlock(block, p, &part.text)) return e;
      user.content.parts.push_back(std::move(part));
    } else if (type == "image") {
      protocol::ContentPart part;
      if (auto e = ImageBlock(block, p, &part)) return e;
      user.content.parts.push_back(std::move(part));
    } else if (type == "document") {
      return Unsupported(p, "document inputs are not supported");
    } else {
      return Unsupported(p, fmt::format("'{}' blocks are not supported in user messages", type));
    }
  }
  if (!user.content.parts.empty()) cv.out->chat.messages.push_back(std::move(user));
  return std::nullopt;
}

// The reasoning a thinking block carries, from its signature (the visible text, when sent, must
// be the sealed one).
Error SealedThinking(const Conversion& cv, const Json& block, const std::string& path, bool redacted, std::string* out) {
  std::string blob, visible;
  if (redacted) {
    if (auto e = CheckKnownFields(block, path, {"type", "data"})) return e;
    if (auto e = String(block, "data", path, &blob)) return e;
  } else {
    if (auto e = CheckKnownFields(block, path, {"type", "thinking", "signature"}, {"cache_control"})) return e;
    if (auto e = String(block, "thinking", path, &visible)) return e;
    if (auto e = String(block, "signature", path, &blob)) return e;
  }
  const std::string field = path + (redacted ? ".data" : ".signature");
  base::Result<std::string> text = cv.ctx.seal != nullptr ? cv.ctx.seal->Open(blob)
                                                           : base::Result<std::string>(base::MakeError(base::ErrorCode::kUnavailable, "no seal"));
  if (!text.ok() && cv.ctx.estimate_sealed) text = visible;  // the text it shows, if any
  if (!text.ok() && cv.ctx.seal == nullptr) return Unsupported(field, "this server keeps no reasoning seal");
  if (!text.ok()) return Bad(field, text.error().message());
  if (!visible.empty() && visible != *text) return Bad(path + ".thinking", "does not match its signature");
  *out += *text;
  return std::nullopt;
}

Error AssistantMessage(Conversion& cv, const Json& content, const std::string& path) {
  ChatMessage m;
  m.role = Role::kAssistant;
  m.content.kind = ContentKind::kText;
  std::string reasoning;
  bool has_reasoning = false;
  for (size_t i = 0; i < content.size(); ++i) {
    std::string p, type;
    if (auto e = TypedElement(content, i, path, "a content block", &p, &type)) return e;
    const Json& block = content[i];
    if (type == "text") {
      std::string text;
      if (auto e = TextBlock(block, p, &text)) return e;
      m.content.text += text;
    } else if (type == "thinking" || type == "redacted_thinking") {
      if (auto e = SealedThinking(cv, block, p, type == "redacted_thinking", &reasoning)) return e;
      has_reasoning = true;
    } else if (type == "tool_use") {
      if (auto e = CheckKnownFields(block, p, {"type", "id", "name", "input"}, {"cache_control"})) return e;
      protocol::ToolCall call;
      if (auto e = String(block, "id", p, &call.id)) return e;
      if (auto e = String(block, "name", p, &call.name)) return e;
      const Json* input = Find(block, "input");
      if (input == nullptr || !input->is_object()) return Bad(p + ".input", "an object is required");
      call.arguments = input->dump();
      m.tool_calls.push_back(std::move(call));
    } else {
      return Unsupported(p, fmt::format("'{}' blocks are not supported in assistant messages", type));
    }
  }
  if (has_reasoning) m.reasoning_content = std::move(reasoning);
  cv.out->chat.messages.push_back(std::move(m));
  return std::nullopt;
}

// A role "system" message: before the conversation it joins the system prompt; later V4.1
// renders it as its system turn, and V4 (whose encoder leaves a later system turn without the
// reply header) as its developer turn, a user-side turn the reply follows.
Error SystemMessage(Conversion& cv, const Json& content, const std::string& path) {
  std::string text;
  if (auto e = SystemText(content, path, &text)) return e;
  auto& messages = cv.out->chat.messages;
  const bool leading = std::all_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return m.role == Role::kSystem; });
  if (leading && !messages.empty()) {
    messages.back().content.text += "\n\n" + text;
    return std::nullopt;
  }
  ChatMessage s;
  s.role = leading || cv.ctx.version == encoding::EncodingVersion::kV41 ? Role::kSystem : Role::kDeveloper;
  s.content.kind = ContentKind::kText;
  s.content.text = std::move(text);
  messages.push_back(std::move(s));
  return std::nullopt;
}

Error Messages(Conversion& cv, const Json& body) {
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) return Bad("messages", "missing (an array is required)");
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  if (messages->empty()) return Bad("messages", "must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string p = fmt::format("messages[{}]", i);
    const Json& m = (*messages)[i];
    if (!m.is_object()) return WrongType(p, "a message object", m);
    if (auto e = CheckKnownFields(m, p, {"role", "content"})) return e;
    std::string role;
    if (auto e = String(m, "role", p, &role)) return e;
    const Json* content = Find(m, "content");
    if (content == nullptr) return Bad(p + ".content", "missing");
    if (role == "system") {
      if (auto e = SystemMessage(cv, *content, p + ".content")) return e;
      continue;
    }
    if (role != "user" && role != "assistant") return Bad(p + ".role", fmt::format("unknown role '{}' (user or assistant)", role));
    Json blocks = *content;
    if (content->is_string()) blocks = Json::array({{{"type", "text"}, {"text", content->get<std::string>()}}});
    if (!blocks.is_array()) return WrongType(p + ".content", "a string or an array of content blocks", *content);
    if (blocks.empty()) return Bad(p + ".content", "must not be empty");
    if (auto e = role == "user" ? UserMessage(cv, blocks, p + ".content") : AssistantMessage(cv, blocks, p + ".content"))
      return e;
  }
  const auto& all = cv.out->chat.messages;
  if (std::none_of(all.begin(), all.end(), [](const ChatMessage& m) { return m.role == Role::kUser || m.role == Role::kTool; }))
    return Bad("messages", "no user message");
  return std::nullopt;
}

// Anthropic's typed tools: server tools run by Anthropic's API (web search, fetch, code
// execution, tool search), and client tools whose schema Anthropic defines (bash, text editor,
// computer, memory): neither has a schema this server could render.
std::string ToolType(const Json& tool) {
  const Json* type = Find(tool, "type");
  return type != nullptr && type->is_string() ? type->get<std::string>() : "custom";
}
bool IsServerTool(const std::string& type) {
  return type.starts_with("web_search_") || type.starts_with("web_fetch_") || type.starts_with("code_execution_") ||
         type.starts_with("tool_search_tool_") || type.starts_with("mcp_toolset");
}

Error Tools(Conversion& cv, const Json& body) {
  const Json* tools = nullptr;
  if (auto e = ArrayField(body, "tools", "", &tools)) return e;
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const Json& tool = (*tools)[i];
    if (!tool.is_object()) return WrongType(p, "a tool object", tool);
    std::string name;
    if (auto e = String(tool, "name", p, &name)) return e;
    const std::string type = ToolType(tool);
    if (IsServerTool(type)) {
      if (cv.ctx.hosted_tools == HostedTools::kReject)
        return Unsupported(p, fmt::format("server tool '{}' ({}) is not run by this server", name, type));
      cv.out->dropped_tools.push_back(name);
      continue;
    }
    if (type != "custom")
      return Unsupported(p + ".type", fmt::format("'{}' tools have a schema this server does not know; define the "
                                                  "tool with an input_schema", type));
    if (auto e = CheckKnownFields(tool, p, {"type", "name", "description", "input_schema", "defer_loading", "strict"},
                                  {"cache_control", "input_examples"}))
      return e;
    const Json* strict = Find(tool, "strict");
    if (strict != nullptr && !strict->is_boolean()) return WrongType(p + ".strict", "a boolean", *strict);
    const Json* schema = Find(tool, "input_schema");
    if (schema == nullptr || !schema->is_object()) return Bad(p + ".input_schema", "an object is required");
    const Json* deferred = Find(tool, "defer_loading");
    if (deferred != nullptr && !deferred->is_boolean()) return WrongType(p + ".defer_loading", "a boolean", *deferred);
    if (deferred != nullptr && deferred->get<bool>() && !cv.referenced_tools.contains(name)) continue;
    protocol::ToolSpec spec;
    spec.name = name;
    spec.function = Json{{"name", name}};
    if (const Json* d = Find(tool, "description")) spec.function["description"] = *d;
    spec.function["parameters"] = *schema;
    if (strict != nullptr && *strict == true) spec.function["strict"] = true;
    cv.out->chat.tools.push_back(std::move(spec));
  }
  return std::nullopt;
}

Error ToolChoice(const Json& body, DialectRequest* out) {
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (!choice->is_object()) return WrongType("tool_choice", "an object", *choice);
  if (auto e = CheckKnownFields(*choice, "tool_choice", {"type", "name", "disable_parallel_tool_use"})) return e;
  std::string type;
  if (auto e = String(*choice, "type", "tool_choice", &type)) return e;
  if (const Json* d = Find(*choice, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) return WrongType("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    out->chat.parallel_tool_calls = !d->get<bool>();
  }
  if (type == "auto") return std::nullopt;
  if (type == "none") {
    out->chat.tool_choice.mode = protocol::ToolChoiceMode::kNone;
    return std::nullopt;
  }
  if (type == "any") {
    out->chat.tool_choice.mode = protocol::ToolChoiceMode::kRequired;
    return std::nullopt;
  }
  if (type == "tool") {
    std::string name;
    if (auto e = String(*choice, "name", "tool_choice", &name)) return e;
    out->chat.tool_choice = {protocol::ToolChoiceMode::kFunction, name};
    return std::nullopt;
  }
  return Bad("tool_choice.type", fmt::format("unknown value '{}' (auto, any, tool or none)", type));
}

Error Thinking(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  if (const Json* thinking = Find(body, "thinking")) {
    if (!thinking->is_object()) return WrongType("thinking", "an object", *thinking);
    if (auto e = CheckKnownFields(*thinking, "thinking", {"type", "budget_tokens", "display"})) return e;
    std::string type;
    if (auto e = String(*thinking, "type", "thinking", &type)) return e;
    if (type != "enabled" && type != "disabled" && type != "adaptive")
      return Bad("thinking.type", fmt::format("unknown value '{}' (enabled, disabled or adaptive)", type));
    out->chat.thinking = type != "disabled";
    if (const Json* budget = Find(*thinking, "budget_tokens")) {
      if (type != "enabled") return Bad("thinking.budget_tokens", "only with thinking.type \"enabled\"");
      if (!budget->is_number_integer() || budget->get<int64_t>() < 1) return Bad("thinking.budget_tokens", "a positive integer is required");
      out->options.reasoning_budget = budget->get<int64_t>();
    }
    std::string display;
    if (auto e = String(*thinking, "display", "thinking", &display, false)) return e;
    if (!display.empty() && display != "omitted" && display != "summarized")
      return Bad("thinking.display", fmt::format("unknown value '{}' (summarized or omitted)", display));
    out->omit_thinking = display == "omitted";
  }
  const Json* config = Find(body, "output_config");
  if (config == nullptr) return std::nullopt;
  if (!config->is_object()) return WrongType("output_config", "an object", *config);
  if (auto e = CheckKnownFields(*config, "output_config", {"effort", "format"})) return e;
  std::string effort;
  if (auto e = String(*config, "effort", "output_config", &effort, false)) return e;
  if (!effort.empty()) {
    std::optional<std::string> mapped = MapEffortName(effort, ctx.version);
    if (!mapped) return Bad("output_config.effort", fmt::format("unknown value '{}' (minimal, low, medium, high, xhigh or max)", effort));
    out->chat.reasoning_effort = *mapped;
  }
  if (const Json* format = Find(*config, "format")) {
    if (auto e = CheckKnownFields(*format, "output_config.format", {"type", "schema"})) return e;
    if (!format->is_object() || Find(*format, "type") == nullptr || (*format)["type"] != "json_schema" ||
        Find(*format, "schema") == nullptr)
      return Bad("output_config.format", "expected {\"type\": \"json_schema\", \"schema\": {...}}");
    out->chat.response_format = Json{{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", (*format)["schema"]}}}};
  }
  return std::nullopt;
}

// context_management.edits: clear_thinking keeps the reasoning of the last N assistant turns
// (default 1; "all" keeps every one).
Error ContextManagement(const Json& body, DialectRequest* out) {
  const Json* cm = Find(body, "context_management");
  if (cm == nullptr) return std::nullopt;
  if (!cm->is_object()) return WrongType("context_management", "an object", *cm);
  if (auto e = CheckKnownFields(*cm, "context_management", {"edits"})) return e;
  const Json* edits = Find(*cm, "edits");
  if (edits == nullptr) return std::nullopt;
  if (!edits->is_array()) return WrongType("context_management.edits", "an array", *edits);
  for (size_t i = 0; i < edits->size(); ++i) {
    const std::string p = fmt::format("context_management.edits[{}]", i);
    const Json& edit = (*edits)[i];
    std::string type;
    if (!edit.is_object()) return WrongType(p, "an object", edit);
    if (auto e = String(edit, "type", p, &type)) return e;
    if (!type.starts_with("clear_thinking_")) return Unsupported(p + ".type", fmt::format("'{}' is not supported", type));
    if (auto e = CheckKnownFields(edit, p, {"type", "keep"})) return e;
    int64_t keep = 1;
    if (const Json* k = Find(edit, "keep")) {
      if (*k == "all") continue;
      const Json* value = k->is_object() ? Find(*k, "value") : nullptr;
      const Json* kind = k->is_object() ? Find(*k, "type") : nullptr;
      if (value == nullptr || kind == nullptr || !value->is_number_integer() || *kind != "thinking_turns" ||
          value->get<int64_t>() < 0)
        return Bad(p + ".keep", "expected \"all\" or {\"type\": \"thinking_turns\", \"value\": N}");
      keep = value->get<int64_t>();
    }
    auto& messages = out->chat.messages;
    for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
      if (it->role != Role::kAssistant || !it->reasoning_content) continue;
      if (keep > 0) --keep;
      else it->reasoning_content.reset();
    }
  }
  return std::nullopt;
}

Error Generation(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  if (Find(body, "max_tokens") == nullptr) return Bad("max_tokens", "missing (an integer is required)");
  return ParseDialectGeneration(body,
                                {{"model", "model"}, {"max_tokens", "max_tokens"}, {"temperature", "temperature"},
                                 {"top_p", "top_p"}, {"top_k", "top_k"}, {"stream", "stream"}, {"stop_sequences", "stop"}},
                                ctx.vocab_size, &out->options);
}

}  // namespace

std::optional<net::ApiError> ParseMessagesBody(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  if (auto e = CheckKnownFields(body, kMessagesFields)) return e;
  if (auto e = Generation(body, ctx, out)) return e;
  Conversion cv{ctx, out, {}};
  if (const Json* system = Find(body, "system")) {
    ChatMessage s;
    s.role = Role::kSystem;
    s.content.kind = ContentKind::kText;
    if (auto e = SystemText(*system, "system", &s.content.text)) return e;
    out->chat.messages.push_back(std::move(s));
  }
  if (auto e = Messages(cv, body)) return e;
  if (auto e = Tools(cv, body)) return e;
  if (auto e = ToolChoice(body, out)) return e;
  if (auto e = Thinking(body, ctx, out)) return e;
  if (auto e = ContextManagement(body, out)) return e;
  FlattenTextParts(out->chat, ctx.version);
  return std::nullopt;
}

}  // namespace flashserve::dialect
