// The DeepSeek-V4.1 encoder (the V4.1-Flash release's encoding/encoding.py): request -> turns
// with V4.1's rules, then the shared renderer. V4.1 specifics: the <｜System｜> token, a numeric
// reasoning effort in every thinking prompt, no developer role, image parts as placeholders,
// `::` namespaced tool names, and tool-call arguments accepted as objects or (doubly) encoded
// JSON strings.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "encoding/conversation.h"
#include "encoding/encoder.h"
#include "encoding/python_json.h"

namespace flashserve::encoding {
namespace {

using Json = nlohmann::ordered_json;
using protocol::ChatMessage;
using protocol::ContentKind;
using protocol::PartType;
using protocol::Role;

base::Error BadRequest(std::string message) {
  return base::MakeError(base::ErrorCode::kBadChatRequest, std::move(message));
}

base::Result<std::string> EffortPrefix(const protocol::ReasoningEffort& effort) {
  int64_t budget = 75;  // "high", the default
  if (const auto* name = std::get_if<std::string>(&effort)) {
    if (*name == "low") {
      budget = 50;
    } else if (*name == "max") {
      budget = 100;
    } else if (*name != "high") {
      return BadRequest(
          fmt::format("reasoning_effort: the V4.1 encoding accepts an integer in [1, 100] "
                      "or one of \"low\", \"high\", \"max\", got \"{}\"",
                      *name));
    }
  } else if (const auto* value = std::get_if<int64_t>(&effort)) {
    if (*value < 1 || *value > 100) {
      return BadRequest(
          fmt::format("reasoning_effort: the V4.1 encoding accepts an integer in [1, 100] "
                      "or one of \"low\", \"high\", \"max\", got {}",
                      *value));
    }
    budget = *value;
  }
  return fmt::format(
      "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough "
      "the reasoning)\n\n",
      budget);
}

void AppendPart(const protocol::ContentPart& part, PieceList& pieces) {
  if (part.type == PartType::kImage) {
    AppendImage(pieces, part.image_source);
  } else {
    AppendText(pieces, part.text);
  }
}

// Text and image parts joined by blank lines; other parts are left out (the release's flattening
// of array content for every role but user). `absent_text` stands for a missing value.
PieceList FlatContent(const ChatMessage& message, std::string_view absent_text) {
  PieceList pieces;
  const auto& content = message.content;
  if (content.kind == ContentKind::kText) {
    AppendText(pieces, content.text);
  } else if (content.kind != ContentKind::kParts || content.parts.empty()) {
    AppendText(pieces, absent_text);
  } else {
    bool first = true;
    for (const protocol::ContentPart& part : content.parts) {
      if (part.type == PartType::kOther) continue;
      if (!first) AppendText(pieces, "\n\n");
      first = false;
      AppendPart(part, pieces);
    }
  }
  return pieces;
}

base::Result<std::vector<Block>> UserBlocks(const ChatMessage& message, size_t index) {
  const auto& content = message.content;
  if (content.kind == ContentKind::kNull) {
    return MessageError(index, "user content must not be null");
  }
  std::vector<Block> blocks;
  if (content.kind != ContentKind::kParts) {
    blocks.emplace_back();
    AppendText(blocks.back().content, content.text);
    return blocks;
  }
  for (const protocol::ContentPart& part : content.parts) {
    Block& block = blocks.emplace_back();
    if (part.type == PartType::kOther) {
      block.kind = Block::Kind::kUnsupported;
      block.type_name = part.type_name;
    } else {
      AppendPart(part, block.content);
    }
  }
  return blocks;
}

// "ns::name" names: at most one "::" (the release asserts the rest contains none).
base::Status CheckToolName(std::string_view name, std::string_view where) {
  const size_t sep = name.find("::");
  if (sep == std::string_view::npos || name.find("::", sep + 2) == std::string_view::npos) {
    return base::Status::Ok();
  }
  return BadRequest(fmt::format("{}: tool name '{}' may contain '::' at most once", where, name));
}

// Objects are used as they are; strings are decoded up to twice (double-encoded JSON); anything
// that does not end as an object is wrapped into one "arguments" parameter.
DsmlCall DecodeCall(const protocol::ToolCall& call) {
  Json arguments = call.arguments;
  for (int i = 0; i < 2 && arguments.is_string(); ++i) {
    std::optional<Json> loaded = PythonJsonLoads(arguments.get_ref<const std::string&>());
    if (!loaded.has_value()) break;
    arguments = std::move(*loaded);
  }
  if (!arguments.is_object()) {
    arguments = Json::object();
    arguments["arguments"] = call.arguments;
  }
  return DsmlCall{call.name, ParamsFromObject(arguments)};
}

base::Result<Turn> ConvertMessage(const ChatMessage& message, size_t index) {
  FS_RETURN_IF_ERROR(CheckParts(message, index));
  Turn turn;
  turn.role = message.role;
  switch (message.role) {
    case Role::kSystem:
    case Role::kAssistant:
      turn.content = FlatContent(message, "");
      break;
    case Role::kLatestReminder:
      turn.content = FlatContent(message, "None");
      break;
    case Role::kDeveloper:
      turn.render_error = MessageError(index,
                                       "the V4.1 encoding has no developer role (only thinking "
                                       "mode drops developer messages before the last "
                                       "user message)");
      break;
    case Role::kUser: {
      FS_ASSIGN_OR_RETURN(turn.blocks, UserBlocks(message, index));
      break;
    }
    case Role::kTool: {
      Block& block = turn.blocks.emplace_back();
      block.kind = Block::Kind::kToolResult;
      block.content =
          FlatContent(message, message.content.kind == ContentKind::kNull ? "None" : "");
      block.tool_use_id = message.tool_call_id.value_or("");
      break;
    }
  }
  if (message.role != Role::kAssistant) return turn;
  AppendText(turn.reasoning, message.reasoning_content.value_or(""));
  for (size_t i = 0; i < message.tool_calls.size(); ++i) {
    const protocol::ToolCall& call = message.tool_calls[i];
    FS_RETURN_IF_ERROR(
        CheckToolName(call.name, fmt::format("messages[{}].tool_calls[{}]", index, i)));
    turn.tool_calls.push_back(DecodeCall(call));
    turn.call_ids.push_back(call.id);
  }
  return turn;
}

// The namespace name a tool declares: a string, or the "name" of an object; nullopt for none.
base::Result<std::optional<std::string>> NamespaceName(const Json& ns, std::string_view where) {
  if (ns.is_null()) return std::optional<std::string>();
  if (ns.is_string()) return std::optional<std::string>(ns.get<std::string>());
  auto name = ns.is_object() ? ns.find("name") : ns.end();
  if (ns.is_object() && name != ns.end() && name->is_string()) {
    return std::optional<std::string>(name->get<std::string>());
  }
  return BadRequest(
      fmt::format("{}: namespace must be a string or an object with a string name", where));
}

// The release's tools_from_openai_format: the name becomes "namespace::name", the namespace key
// is removed and its description (if any) is prefixed to the tool's.
base::Result<std::string> ToolSchema(const protocol::ToolSpec& tool, size_t index) {
  const std::string where = fmt::format("tools[{}]", index);
  Json function = tool.function;
  if (!tool.tool_namespace.is_null()) function["namespace"] = tool.tool_namespace;
  Json ns = function.contains("namespace") ? function["namespace"] : Json();
  FS_ASSIGN_OR_RETURN(std::optional<std::string> ns_name, NamespaceName(ns, where));
  std::string name = tool.name;
  if (size_t sep = name.find("::"); sep != std::string::npos) {
    if (ns_name.has_value() && *ns_name != name.substr(0, sep)) {
      return BadRequest(
          fmt::format("{}: tool name '{}' conflicts with namespace '{}'", where, name, *ns_name));
    }
    ns_name = name.substr(0, sep);
    name = name.substr(sep + 2);
  }
  if (name.find("::") != std::string::npos ||
      (ns_name && ns_name->find("::") != std::string::npos)) {
    return BadRequest(
        fmt::format("{}: tool name '{}' may contain '::' at most once", where, tool.name));
  }
  function["name"] = ns_name.has_value() ? *ns_name + "::" + name : name;
  function.erase("namespace");
  auto ns_description = ns.is_object() ? ns.find("description") : ns.end();
  if (ns.is_object() && ns_description != ns.end() && !ns_description->is_null() &&
      !(ns_description->is_string() && ns_description->get_ref<const std::string&>().empty())) {
    auto own = function.find("description");
    const bool own_empty = own == function.end() || own->is_null() ||
                           (own->is_string() && own->get_ref<const std::string&>().empty());
    if (!ns_description->is_string() || (!own_empty && !own->is_string())) {
      return BadRequest(where + ": namespace and tool descriptions must be strings");
    }
    function["description"] = ns_description->get<std::string>() + "\n" +
                              (own_empty ? std::string() : own->get<std::string>());
  }
  return PythonJsonDumps(function);
}

}  // namespace

base::Result<EncodedPrompt> EncodeV41(const protocol::ChatRequest& request) {
  Dialect dialect;
  dialect.tags = TagsFor(EncodingVersion::kV41);
  dialect.system_token = true;
  if (!request.messages.empty()) {
    FS_ASSIGN_OR_RETURN(dialect.effort_prefix, EffortPrefix(request.reasoning_effort));
  }
  std::vector<Turn> turns;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    FS_ASSIGN_OR_RETURN(Turn turn, ConvertMessage(request.messages[i], i));
    turns.push_back(std::move(turn));
  }
  std::vector<std::string> schemas;
  if (ToolsRendered(request)) {
    for (size_t i = 0; i < request.tools.size(); ++i) {
      FS_ASSIGN_OR_RETURN(std::string schema, ToolSchema(request.tools[i], i));
      schemas.push_back(std::move(schema));
    }
  }
  AttachRequestSections(request, std::move(schemas), turns);
  return RenderConversation(std::move(turns), dialect, ThinkingEnabled(request));
}

}  // namespace flashserve::encoding
