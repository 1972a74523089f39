// The DeepSeek-V4 encoder (encoding_dsv4.py): request -> turns with V4's rules, then the
// shared renderer. V4 specifics: no <｜System｜> token, a developer role rendered as a user
// turn, string-only message content (parts with pictures as Vision-Exp renders them, when
// asked), "max" effort as a fixed paragraph, and tool-call arguments decoded with json.loads
// (anything else is wrapped into one "arguments" parameter).
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
using protocol::Role;

constexpr std::string_view kMaxEffortPrefix =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

base::Result<std::string> EffortPrefix(const protocol::ReasoningEffort& effort) {
  if (std::holds_alternative<std::monostate>(effort)) return std::string();
  if (const auto* name = std::get_if<std::string>(&effort)) {
    if (*name == "high") return std::string();
    if (*name == "max") return std::string(kMaxEffortPrefix);
  }
  const std::string shown = std::holds_alternative<std::string>(effort)
                                ? "\"" + std::get<std::string>(effort) + "\""
                                : std::to_string(std::get<int64_t>(effort));
  return base::MakeError(
      base::ErrorCode::kBadChatRequest,
      fmt::format("reasoning_effort: the V4 encoding accepts \"high\" or \"max\" "
                  "(or no value), got {}",
                  shown));
}

base::Error PartsRejected(size_t index, Role role) {
  return MessageError(index, fmt::format("the V4 encoding does not accept content as an array of "
                                         "parts for role {} (send a string)",
                                         protocol::RoleName(role)));
}

// Parts joined by blank lines: text as it is, a picture as its placeholder (with
// `pictures`; else, as for any other part, "[Unsupported <type>]").
PieceList PartsContent(const std::vector<protocol::ContentPart>& parts, bool pictures) {
  PieceList pieces;
  for (size_t i = 0; i < parts.size(); ++i) {
    const protocol::ContentPart& part = parts[i];
    if (i > 0) AppendText(pieces, "\n\n");
    if (part.type == protocol::PartType::kText) {
      AppendText(pieces, part.text);
    } else if (part.type == protocol::PartType::kImage && pictures) {
      AppendImage(pieces, part.image_source);
    } else {
      AppendText(pieces, fmt::format("[Unsupported {}]", part.type_name));
    }
  }
  return pieces;
}

// `content or ""` of the reference; kAbsent/kNull -> `absent_text`; parts only with `pictures`.
base::Result<PieceList> StringContent(const ChatMessage& message, size_t index,
                                      std::string_view absent_text, bool pictures) {
  PieceList pieces;
  switch (message.content.kind) {
    case ContentKind::kAbsent:
    case ContentKind::kNull:
      AppendText(pieces, absent_text);
      break;
    case ContentKind::kText:
      AppendText(pieces, message.content.text);
      break;
    case ContentKind::kParts:
      if (!pictures) return PartsRejected(index, message.role);
      return PartsContent(message.content.parts, true);
  }
  return pieces;
}

// A tool result: absent -> "", null -> "None" (Python formats None), parts -> PartsContent.
PieceList ToolResultContent(const ChatMessage& message, bool pictures) {
  PieceList pieces;
  const auto& content = message.content;
  if (content.kind == ContentKind::kNull) AppendText(pieces, "None");
  if (content.kind == ContentKind::kText) AppendText(pieces, content.text);
  if (content.kind == ContentKind::kParts) pieces = PartsContent(content.parts, pictures);
  return pieces;
}

// json.loads(arguments): a value it cannot load (not a string, or not JSON) is wrapped into one
// "arguments" parameter; JSON that is not an object makes the reference fail.
base::Result<DsmlCall> DecodeCall(const protocol::ToolCall& call, size_t index) {
  std::optional<Json> loaded;
  if (call.arguments.is_string()) {
    loaded = PythonJsonLoads(call.arguments.get_ref<const std::string&>());
  }
  Json arguments = Json::object();
  if (!loaded.has_value()) {
    arguments["arguments"] = call.arguments;
  } else if (loaded->is_object()) {
    arguments = std::move(*loaded);
  } else {
    return MessageError(index, fmt::format("tool call '{}': arguments decode to a JSON {}, not an "
                                           "object",
                                           call.name, loaded->type_name()));
  }
  return DsmlCall{call.name, ParamsFromObject(arguments)};
}

// `pictures`: Vision-Exp's rendering of parts (EncodeOptions::v4_picture_parts).
base::Result<Turn> ConvertMessage(const ChatMessage& message, size_t index, bool pictures) {
  if (pictures) FS_RETURN_IF_ERROR(CheckParts(message, index));
  Turn turn;
  turn.role = message.role;
  const auto kind = message.content.kind;
  switch (message.role) {
    case Role::kSystem: {
      FS_ASSIGN_OR_RETURN(turn.content, StringContent(message, index, "", pictures));
      break;
    }
    case Role::kDeveloper:
      if (kind == ContentKind::kParts && pictures && !message.content.parts.empty()) {
        turn.content = PartsContent(message.content.parts, true);
      } else if (kind == ContentKind::kParts) {
        turn.render_error = PartsRejected(index, message.role);
      } else if (kind != ContentKind::kText || message.content.text.empty()) {
        turn.render_error = MessageError(index, "a developer message needs non-empty content");
      } else {
        AppendText(turn.content, message.content.text);
      }
      break;
    case Role::kUser: {
      if (kind == ContentKind::kNull) return MessageError(index, "user content must not be null");
      Block block;
      FS_ASSIGN_OR_RETURN(block.content, StringContent(message, index, "", pictures));
      turn.blocks.push_back(std::move(block));
      break;
    }
    case Role::kTool: {
      Block block;
      block.kind = Block::Kind::kToolResult;
      block.content = ToolResultContent(message, pictures);
      block.tool_use_id = message.tool_call_id.value_or("");
      turn.blocks.push_back(std::move(block));
      break;
    }
    case Role::kLatestReminder: {
      FS_ASSIGN_OR_RETURN(turn.content, StringContent(message, index, "None", pictures));
      break;
    }
    case Role::kAssistant: {
      FS_ASSIGN_OR_RETURN(turn.content, StringContent(message, index, "", pictures));
      AppendText(turn.reasoning, message.reasoning_content.value_or(""));
      for (const protocol::ToolCall& call : message.tool_calls) {
        FS_ASSIGN_OR_RETURN(DsmlCall dsml, DecodeCall(call, index));
        turn.tool_calls.push_back(std::move(dsml));
        turn.call_ids.push_back(call.id);
      }
      break;
    }
  }
  return turn;
}

}  // namespace

base::Result<EncodedPrompt> EncodeV4(const protocol::ChatRequest& request, bool picture_parts) {
  Dialect dialect;
  dialect.tags = TagsFor(EncodingVersion::kV4);
  dialect.developer_is_user = true;
  if (!request.messages.empty()) {
    FS_ASSIGN_OR_RETURN(dialect.effort_prefix, EffortPrefix(request.reasoning_effort));
  }
  std::vector<Turn> turns;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    FS_ASSIGN_OR_RETURN(Turn turn, ConvertMessage(request.messages[i], i, picture_parts));
    turns.push_back(std::move(turn));
  }
  std::vector<std::string> schemas;
  if (ToolsRendered(request)) {
    for (const protocol::ToolSpec& tool : request.tools)
      schemas.push_back(PythonJsonDumps(tool.function));
  }
  AttachRequestSections(request, std::move(schemas), turns);
  return RenderConversation(std::move(turns), dialect, ThinkingEnabled(request));
}

}  // namespace flashserve::encoding
