// OpenAI Responses body (stateless) -> DialectRequest (dialect/dialect_request.h): input items,
// instructions, function and namespace tools, hosted tools, text.format, reasoning, include.
#include <algorithm>

#include <fmt/format.h>

#include "dialect/dialect_request.h"
#include "dialect/json_fields.h"

namespace flashserve::dialect {
namespace {

using namespace json_fields;  // NOLINT: the room's small JSON reading vocabulary
using protocol::ChatMessage;
using protocol::ContentKind;
using protocol::Role;

// An input_image part: its image_url (a data URL, or a URL the image loader judges).
Error ImagePart(const Json& part, const std::string& path, protocol::ContentPart* out) {
  if (auto e = CheckKnownFields(part, path, {"type", "image_url", "file_id"}, {"detail"})) return e;
  if (Find(part, "file_id") != nullptr) return Unsupported(path + ".file_id", "this server stores no files; send image_url");
  out->type = protocol::PartType::kImage;
  out->type_name = "input_image";
  out->field_path = path;
  return String(part, "image_url", path, &out->image_source);
}

// Text of message content: a string, or input_text / output_text parts joined by blank lines.
// With `parts` (user messages), every part is also kept there in order, input_image parts too.
Error ContentText(const Json& content, const std::string& path, std::string* out,
                  std::vector<protocol::ContentPart>* parts = nullptr) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return WrongType(path, "a string or an array of content parts", content);
  int texts = 0;
  for (size_t i = 0; i < content.size(); ++i) {
    std::string p, type, text;
    if (auto e = TypedElement(content, i, path, "a content part", &p, &type)) return e;
    const Json& part = content[i];
    if (type == "input_image" && parts != nullptr) {
      if (auto e = ImagePart(part, p, &parts->emplace_back())) return e;
      continue;
    }
    if (type == "input_image" || type == "input_file" || type == "input_audio")
      return Unsupported(p, fmt::format("{} parts are not supported here", type));
    if (type != "input_text" && type != "output_text")
      return Unsupported(p, fmt::format("'{}' parts are not supported", type));
    if (auto e = CheckKnownFields(part, p, {"type", "text"}, {"annotations", "logprobs"})) return e;
    if (auto e = String(part, "text", p, &text)) return e;
    *out += (texts++ > 0 ? "\n\n" : "") + text;
    if (parts != nullptr) parts->push_back({protocol::PartType::kText, "text", text, "", ""});
  }
  return std::nullopt;
}

// Builds the conversation: consecutive reasoning, assistant message and function_call items
// form one assistant turn, as the model produced them.
struct Conversation {
  const DialectContext& ctx;
  std::vector<ChatMessage>& messages;
  bool turn_open = false;  // the last message is an assistant turn still taking items

  ChatMessage& Assistant(bool fresh) {
    if (!turn_open || fresh) {
      ChatMessage m;
      m.role = Role::kAssistant;
      m.content.kind = ContentKind::kText;
      messages.push_back(std::move(m));
      turn_open = true;
    }
    return messages.back();
  }
  // System and developer items are instructions: before the conversation they join the system
  // turn; later, V4 renders them as its developer turn and V4.1 as a system turn.
  Role Instructions() const {
    const bool leading = std::all_of(messages.begin(), messages.end(), [](const ChatMessage& m) { return m.role == Role::kSystem; });
    if (leading) return Role::kSystem;
    return ctx.version == encoding::EncodingVersion::kV4 ? Role::kDeveloper : Role::kSystem;
  }
  void Add(ChatMessage m) {
    messages.push_back(std::move(m));
    turn_open = false;
  }
};

Error Reasoning(Conversation& cv, const Json& item, const std::string& p) {
  if (auto e = CheckKnownFields(item, p, {"type", "id", "summary", "content", "encrypted_content"}, {"status"})) return e;
  std::string text;
  const Json* sealed = Find(item, "encrypted_content");
  bool opened = false;
  if (sealed != nullptr) {
    if (!sealed->is_string()) return WrongType(p + ".encrypted_content", "a string", *sealed);
    base::Result<std::string> plain = cv.ctx.seal != nullptr ? cv.ctx.seal->Open(sealed->get<std::string>())
                                                             : base::Result<std::string>(base::MakeError(base::ErrorCode::kUnavailable, "no seal"));
    if (!plain.ok() && !cv.ctx.estimate_sealed) {
      if (cv.ctx.seal == nullptr) return Unsupported(p + ".encrypted_content", "this server keeps no reasoning seal");
      return Bad(p + ".encrypted_content", plain.error().message());
    }
    opened = plain.ok();
    if (opened) text = *plain;
  }
  // The reasoning as text; an estimate's stand-in for a blob this process cannot open.
  if (const Json* content = Find(item, "content"); content != nullptr && !opened) {
    if (!content->is_array()) return WrongType(p + ".content", "an array", *content);
    for (size_t i = 0; i < content->size(); ++i) {
      std::string piece;
      if (auto e = String((*content)[i], "text", fmt::format("{}.content[{}]", p, i), &piece)) return e;
      text += piece;
    }
  }
  ChatMessage& m = cv.Assistant(true);
  m.reasoning_content = std::move(text);
  return std::nullopt;
}

Error Item(Conversation& cv, const Json& item, const std::string& p) {
  if (!item.is_object()) return WrongType(p, "an input item", item);
  std::string type = "message";
  if (auto e = String(item, "type", p, &type, false)) return e;
  if (type == "message") {
    if (auto e = CheckKnownFields(item, p, {"type", "role", "content"}, {"id", "status"})) return e;
    std::string role_name, text;
    if (auto e = String(item, "role", p, &role_name)) return e;
    const Json* content = Find(item, "content");
    if (content == nullptr) return Bad(p + ".content", "missing");
    std::vector<protocol::ContentPart> parts;
    if (auto e = ContentText(*content, p + ".content", &text, role_name == "user" ? &parts : nullptr)) return e;
    const bool has_image = std::any_of(parts.begin(), parts.end(),
                                       [](const protocol::ContentPart& part) { return part.type == protocol::PartType::kImage; });
    if (role_name == "assistant") {
      ChatMessage& m = cv.Assistant(cv.turn_open && !cv.messages.back().content.text.empty());
      m.content.text += text;
      return std::nullopt;
    }
    if (role_name != "user" && role_name != "system" && role_name != "developer")
      return Bad(p + ".role", fmt::format("unknown role '{}' (user, assistant, system or developer)", role_name));
    ChatMessage m;
    m.role = role_name == "user" ? Role::kUser : cv.Instructions();
    if (m.role == Role::kSystem && !cv.messages.empty() && cv.messages.back().role == Role::kSystem) {
      cv.messages.back().content.text += "\n\n" + text;  // instructions before the conversation: one system turn
      return std::nullopt;
    }
    if (has_image) {  // pictures stay parts, where they stand among the text
      m.content.kind = ContentKind::kParts;
      m.content.parts = std::move(parts);
    } else {
      m.content.kind = ContentKind::kText;
      m.content.text = std::move(text);
    }
    cv.Add(std::move(m));
    return std::nullopt;
  }
  if (type == "function_call") {
    if (auto e = CheckKnownFields(item, p, {"type", "call_id", "name", "arguments", "namespace"}, {"id", "status"})) return e;
    protocol::ToolCall call;
    std::string ns, arguments;
    if (auto e = String(item, "call_id", p, &call.id)) return e;
    if (auto e = String(item, "name", p, &call.name)) return e;
    if (auto e = String(item, "namespace", p, &ns, false)) return e;
    if (auto e = String(item, "arguments", p, &arguments)) return e;
    if (!ns.empty()) call.name = ns + "::" + call.name;
    call.arguments = arguments;
    cv.Assistant(false).tool_calls.push_back(std::move(call));
    return std::nullopt;
  }
  if (type == "function_call_output") {
    if (auto e = CheckKnownFields(item, p, {"type", "call_id", "output"}, {"id", "status"})) return e;
    ChatMessage m;
    m.role = Role::kTool;
    std::string id;
    if (auto e = String(item, "call_id", p, &id)) return e;
    m.tool_call_id = id;
    m.content.kind = ContentKind::kText;
    const Json* output = Find(item, "output");
    if (output == nullptr) return Bad(p + ".output", "missing");
    if (auto e = ContentText(*output, p + ".output", &m.content.text)) return e;
    cv.Add(std::move(m));
    return std::nullopt;
  }
  if (type == "reasoning") return Reasoning(cv, item, p);
  return Unsupported(p + ".type", fmt::format("'{}' items are not supported", type));
}

Error Input(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  if (const Json* instructions = Find(body, "instructions")) {
    if (!instructions->is_string()) return WrongType("instructions", "a string", *instructions);
    ChatMessage s;
    s.role = Role::kSystem;
    s.content.kind = ContentKind::kText;
    s.content.text = instructions->get<std::string>();
    out->chat.messages.push_back(std::move(s));
  }
  const Json* input = Find(body, "input");
  if (input == nullptr) return Bad("input", "missing (a string or an array of items is required)");
  Conversation cv{ctx, out->chat.messages};
  if (input->is_string()) {
    ChatMessage m;
    m.content.kind = ContentKind::kText;
    m.content.text = input->get<std::string>();
    cv.Add(std::move(m));
  } else if (input->is_array()) {
    if (input->empty()) return Bad("input", "must not be empty");
    for (size_t i = 0; i < input->size(); ++i)
      if (auto e = Item(cv, (*input)[i], fmt::format("input[{}]", i))) return e;
  } else {
    return WrongType("input", "a string or an array of items", *input);
  }
  if (std::none_of(out->chat.messages.begin(), out->chat.messages.end(),
                   [](const ChatMessage& m) { return m.role == Role::kUser || m.role == Role::kTool; }))
    return Bad("input", "no user message or tool output");
  if (out->chat.messages.back().role == Role::kAssistant)
    return Unsupported("input", "a final assistant item is not supported; end with a user message or a tool output");
  return std::nullopt;
}

bool IsHostedTool(const std::string& type) {
  return type.starts_with("web_search") || type == "file_search" || type == "code_interpreter" ||
         type.starts_with("computer_use") || type == "image_generation" || type == "mcp" || type == "local_shell";
}

// A function tool, inside namespace `ns` ("" = none; `ns_description` its description).
// V4.1 renders namespaces itself; V4 gets the same name ("ns::name") and description prefix.
Error FunctionTool(const Json& tool, const std::string& p, const std::string& ns, const std::string& ns_description,
                   const DialectContext& ctx, DialectRequest* out) {
  if (auto e = CheckKnownFields(tool, p, {"type", "name", "description", "parameters", "strict"})) return e;
  const Json* strict = Find(tool, "strict");
  if (strict != nullptr && !strict->is_boolean()) return WrongType(p + ".strict", "a boolean", *strict);
  protocol::ToolSpec spec;
  if (auto e = String(tool, "name", p, &spec.name)) return e;
  spec.function = Json{{"name", ns.empty() ? spec.name : ns + "::" + spec.name}};
  if (const Json* d = Find(tool, "description")) spec.function["description"] = *d;
  spec.function["parameters"] = tool.contains("parameters") ? tool["parameters"] : Json::object();
  if (strict != nullptr && *strict == true) spec.function["strict"] = true;
  spec.name = spec.function["name"].get<std::string>();
  if (!ns.empty() && ctx.version == encoding::EncodingVersion::kV41) {
    spec.tool_namespace = Json{{"name", ns}};
    if (!ns_description.empty()) spec.tool_namespace["description"] = ns_description;
  } else if (!ns_description.empty()) {
    const Json* d = Find(tool, "description");
    spec.function["description"] = ns_description + (d != nullptr && d->is_string() ? "\n" + d->get<std::string>() : "");
  }
  out->chat.tools.push_back(std::move(spec));
  return std::nullopt;
}

Error Tools(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  const Json* tools = nullptr;
  if (auto e = ArrayField(body, "tools", "", &tools)) return e;
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    std::string p, type;
    if (auto e = TypedElement(*tools, i, "tools", "a tool object", &p, &type)) return e;
    const Json& tool = (*tools)[i];
    if (type == "function") {
      if (auto e = FunctionTool(tool, p, "", "", ctx, out)) return e;
    } else if (type == "namespace") {
      std::string ns, ns_description;
      if (auto e = CheckKnownFields(tool, p, {"type", "name", "description", "tools"})) return e;
      if (auto e = String(tool, "name", p, &ns)) return e;
      if (auto e = String(tool, "description", p, &ns_description, false)) return e;
      const Json* inner = Find(tool, "tools");
      if (inner == nullptr || !inner->is_array()) return Bad(p + ".tools", "an array of function tools is required");
      for (size_t k = 0; k < inner->size(); ++k) {
        const std::string q = fmt::format("{}.tools[{}]", p, k);
        std::string inner_type = "function";
        if (auto e = String((*inner)[k], "type", q, &inner_type, false)) return e;
        if (inner_type != "function") return Unsupported(q + ".type", "a namespace groups function tools only");
        if (auto e = FunctionTool((*inner)[k], q, ns, ns_description, ctx, out)) return e;
      }
    } else if (IsHostedTool(type)) {
      if (ctx.hosted_tools == HostedTools::kReject)
        return Unsupported(p, fmt::format("hosted tool '{}' is not run by this server", type));
      out->dropped_tools.push_back(type);
    } else {
      return Unsupported(p + ".type", fmt::format("'{}' tools are not supported", type));
    }
  }
  return std::nullopt;
}

Error ToolChoice(const Json& body, DialectRequest* out) {
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr || *choice == "auto") return std::nullopt;
  if (*choice == "none") {
    out->chat.tool_choice.mode = protocol::ToolChoiceMode::kNone;
    return std::nullopt;
  }
  if (*choice == "required") {
    out->chat.tool_choice.mode = protocol::ToolChoiceMode::kRequired;
    return std::nullopt;
  }
  if (choice->is_object() && Find(*choice, "type") != nullptr && (*choice)["type"] == "function") {
    std::string name;
    if (auto e = String(*choice, "name", "tool_choice", &name)) return e;
    out->chat.tool_choice = {protocol::ToolChoiceMode::kFunction, name};
    return std::nullopt;
  }
  return Bad("tool_choice", "expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
}

Error ReasoningAndText(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  if (const Json* reasoning = Find(body, "reasoning")) {
    if (!reasoning->is_object()) return WrongType("reasoning", "an object", *reasoning);
    if (auto e = CheckKnownFields(*reasoning, "reasoning", {"effort", "summary", "generate_summary"})) return e;
    std::string effort, summary;
    if (auto e = String(*reasoning, "effort", "reasoning", &effort, false)) return e;
    if (effort == "none") {
      out->chat.thinking = false;
    } else if (!effort.empty()) {
      std::optional<std::string> mapped = MapEffortName(effort, ctx.version);
      if (!mapped) return Bad("reasoning.effort", fmt::format("unknown value '{}' (none, minimal, low, medium, high, xhigh or max)", effort));
      out->chat.reasoning_effort = *mapped;
    }
    if (auto e = String(*reasoning, "summary", "reasoning", &summary, false)) return e;
    if (summary.empty())  // the deprecated name of the same setting
      if (auto e = String(*reasoning, "generate_summary", "reasoning", &summary, false)) return e;
    if (summary == "concise")
      return Unsupported("reasoning.summary", "\"concise\" cannot be honoured: the summary is the full reasoning text (auto or detailed)");
    if (!summary.empty() && summary != "auto" && summary != "detailed")
      return Bad("reasoning.summary", fmt::format("unknown value '{}' (auto, concise or detailed)", summary));
    out->summary = !summary.empty();
  }
  if (const Json* text = Find(body, "text")) {
    if (!text->is_object()) return WrongType("text", "an object", *text);
    if (auto e = CheckKnownFields(*text, "text", {"format", "verbosity"})) return e;
    if (const Json* v = Find(*text, "verbosity"); v != nullptr && *v != "medium")
      return Unsupported("text.verbosity", "only \"medium\" (the model's own length) is served");
    if (const Json* format = Find(*text, "format")) {
      std::string type, name = "output";
      if (!format->is_object()) return WrongType("text.format", "an object", *format);
      if (auto e = CheckKnownFields(*format, "text.format", {"type", "name", "schema", "strict", "description"})) return e;
      if (auto e = String(*format, "type", "text.format", &type)) return e;
      if (auto e = String(*format, "name", "text.format", &name, false)) return e;
      if (type == "json_schema") {
        const Json* s = Find(*format, "schema");
        if (s == nullptr || !s->is_object()) return Bad("text.format.schema", "an object is required");
        Json schema = {{"name", name}, {"schema", *s}};
        if (const Json* strict = Find(*format, "strict"); strict != nullptr && !strict->is_boolean())
          return WrongType("text.format.strict", "a boolean", *strict);
        out->chat.response_format = Json{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
      } else if (type == "json_object") {
        out->chat.response_format = Json{{"type", "json_object"}};
      } else if (type != "text") {
        return Bad("text.format.type", fmt::format("unknown value '{}' (text, json_object or json_schema)", type));
      }
    }
  }
  if (const Json* include = Find(body, "include")) {
    if (!include->is_array()) return WrongType("include", "an array", *include);
    for (const Json& v : *include) {
      if (v == "reasoning.encrypted_content") out->encrypted_reasoning = true;
      else if (v == "message.output_text.logprobs") out->output_logprobs = true;
      else return Unsupported("include", fmt::format("{} is not supported", v.dump()));
    }
  }
  return std::nullopt;
}

// Fields that need server-side state or features this stateless server does not keep.
Error StatefulFields(const Json& body) {
  if (const Json* store = Find(body, "store"); store != nullptr && *store == true)
    return Unsupported("store", "this server is stateless: send store: false (or leave it out) and pass the history in input");
  for (const char* key : {"previous_response_id", "background", "conversation", "prompt"}) {
    const Json* v = Find(body, key);
    const bool set = v != nullptr && *v != false && !(v->is_string() && v->get_ref<const std::string&>().empty());
    if (set) return Unsupported(key, "this server is stateless: pass the whole history in input");
  }
  if (const Json* t = Find(body, "truncation"); t != nullptr && *t != "disabled")
    return Unsupported("truncation", "only \"disabled\" (a prompt beyond the context is an error)");
  return std::nullopt;
}

Error Generation(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  Json with_logprobs = body;
  if (out->output_logprobs) with_logprobs["logprobs"] = true;
  Error e = ParseDialectGeneration(with_logprobs,
                                   {{"model", "model"}, {"temperature", "temperature"}, {"top_p", "top_p"},
                                    {"stream", "stream"}, {"max_output_tokens", "max_tokens"},
                                    {"logprobs", "logprobs"}, {"top_logprobs", "top_logprobs"}},
                                   ctx.vocab_size, &out->options);
  if (e && e->param == "top_logprobs") e->message += " (and include message.output_text.logprobs)";
  return e;
}

}  // namespace

std::optional<net::ApiError> ParseResponsesBody(const Json& body, const DialectContext& ctx, DialectRequest* out) {
  if (auto e = CheckKnownFields(body, kResponsesFields)) return e;
  if (auto e = StatefulFields(body)) return e;
  if (const Json* p = Find(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return WrongType("parallel_tool_calls", "a boolean", *p);
    out->chat.parallel_tool_calls = p->get<bool>();
  }
  if (auto e = ReasoningAndText(body, ctx, out)) return e;
  if (auto e = Generation(body, ctx, out)) return e;
  if (auto e = Input(body, ctx, out)) return e;
  if (auto e = Tools(body, ctx, out)) return e;
  if (auto e = ToolChoice(body, out)) return e;
  FlattenTextParts(out->chat, ctx.version);
  Json echo = Json::object();
  for (const char* key : {"instructions", "max_output_tokens", "metadata", "parallel_tool_calls", "temperature", "text",
                          "tool_choice", "tools", "top_p", "reasoning", "truncation", "user", "prompt_cache_key"})
    echo[key] = body.contains(key) ? body[key] : Json();
  out->echo = std::move(echo);
  return std::nullopt;
}

}  // namespace flashserve::dialect
