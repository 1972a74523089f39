// Shared conversation processing and turn rendering (encoding/conversation.h).
#include "encoding/conversation.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "base/check.h"
#include "encoding/python_json.h"

namespace flashserve::encoding {
namespace {

using protocol::Role;

constexpr std::string_view kResponseFormatHead =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// Consecutive user and tool turns become one user turn (the reference's merge_tool_messages).
std::vector<Turn> MergeUserTurns(std::vector<Turn> turns) {
  std::vector<Turn> merged;
  for (Turn& turn : turns) {
    if (turn.role != Role::kUser && turn.role != Role::kTool) {
      merged.push_back(std::move(turn));
    } else if (!merged.empty() && merged.back().role == Role::kUser) {
      for (Block& block : turn.blocks) merged.back().blocks.push_back(std::move(block));
    } else {
      turn.role = Role::kUser;
      merged.push_back(std::move(turn));
    }
  }
  return merged;
}

// Tool results in a user turn follow the order of the latest assistant's tool calls; results
// whose id matches no call sort as if they answered the first call (stable).
void SortToolResults(std::vector<Turn>& turns) {
  std::unordered_map<std::string, size_t> order;
  for (Turn& turn : turns) {
    if (turn.role == Role::kAssistant && !turn.tool_calls.empty()) {
      order.clear();
      for (size_t i = 0; i < turn.call_ids.size(); ++i) {
        if (!turn.call_ids[i].empty()) order[turn.call_ids[i]] = i;
      }
      continue;
    }
    if (turn.role != Role::kUser || order.empty()) continue;
    std::vector<Block> results;
    for (const Block& block : turn.blocks) {
      if (block.kind == Block::Kind::kToolResult) results.push_back(block);
    }
    if (results.size() < 2) continue;
    auto rank = [&order](const Block& block) {
      auto it = order.find(block.tool_use_id);
      return it == order.end() ? size_t{0} : it->second;
    };
    std::stable_sort(results.begin(), results.end(),
                     [&rank](const Block& a, const Block& b) { return rank(a) < rank(b); });
    size_t next = 0;
    for (Block& block : turn.blocks) {
      if (block.kind == Block::Kind::kToolResult) block = std::move(results[next++]);
    }
  }
}

bool IsUserTurn(const std::vector<Turn>& turns, size_t index, const Dialect& dialect) {
  switch (turns[index].role) {
    case Role::kUser:
      return true;
    case Role::kDeveloper:
      return dialect.developer_is_user;
    case Role::kSystem:
      return dialect.system_token && index > 0;
    default:
      return false;
  }
}

int LastUserIndex(const std::vector<Turn>& turns, const Dialect& dialect) {
  for (size_t i = turns.size(); i > 0; --i) {
    if (IsUserTurn(turns, i - 1, dialect)) return static_cast<int>(i - 1);
  }
  return -1;
}

// Thinking mode without tools: assistant turns before the last user turn lose their reasoning;
// developer turns before it are removed.
std::vector<Turn> DropOldReasoning(std::vector<Turn> turns, const Dialect& dialect) {
  const int last_user = LastUserIndex(turns, dialect);
  std::vector<Turn> kept;
  for (size_t i = 0; i < turns.size(); ++i) {
    Turn& turn = turns[i];
    const bool always_kept = turn.role == Role::kUser || turn.role == Role::kSystem ||
                             turn.role == Role::kLatestReminder;
    if (always_kept || static_cast<int>(i) >= last_user) {
      kept.push_back(std::move(turn));
    } else if (turn.role == Role::kAssistant) {
      turn.reasoning.clear();
      kept.push_back(std::move(turn));
    }
  }
  return kept;
}

void AppendSections(const Turn& turn, const Dialect& dialect, PieceList& out) {
  if (!turn.tool_schemas.empty()) {
    AppendText(out, "\n\n");
    AppendToolsSection(out, dialect.tags, turn.tool_schemas);
  }
  if (!turn.response_format.empty()) {
    AppendText(out, kResponseFormatHead);
    AppendText(out, turn.response_format);
  }
}

void AppendUserBlocks(const Turn& turn, PieceList& out) {
  for (size_t i = 0; i < turn.blocks.size(); ++i) {
    const Block& block = turn.blocks[i];
    if (i > 0) AppendText(out, "\n\n");
    switch (block.kind) {
      case Block::Kind::kText:
        AppendPieces(out, block.content);
        break;
      case Block::Kind::kToolResult:
        AppendText(out, "<tool_result>");
        AppendPieces(out, block.content);
        AppendText(out, "</tool_result>");
        break;
      case Block::Kind::kUnsupported:
        AppendText(out, fmt::format("[Unsupported {}]", block.type_name));
        break;
    }
  }
}

struct RenderState {
  const Dialect& dialect;
  bool thinking;
  bool drop;  // old reasoning is dropped (thinking mode without tools)
  int last_user;
};

base::Status RenderTurn(const std::vector<Turn>& turns, size_t i, const RenderState& s,
                        PieceList& out) {
  const Turn& turn = turns[i];
  if (turn.render_error.has_value()) return *turn.render_error;
  const bool effort = i == 0 && s.thinking && !s.dialect.effort_prefix.empty();
  if (s.dialect.system_token && i == 0 && (effort || turn.role == Role::kSystem)) {
    AppendControl(out, kSystemToken);
  }
  if (effort) AppendText(out, s.dialect.effort_prefix);
  switch (turn.role) {
    case Role::kSystem:
      if (s.dialect.system_token && i > 0) AppendControl(out, kSystemToken);
      AppendPieces(out, turn.content);
      AppendSections(turn, s.dialect, out);
      break;
    case Role::kDeveloper:
      AppendControl(out, kUserToken);
      AppendPieces(out, turn.content);
      AppendSections(turn, s.dialect, out);
      break;
    case Role::kUser:
      AppendControl(out, kUserToken);
      AppendUserBlocks(turn, out);
      break;
    case Role::kLatestReminder:
      AppendControl(out, kLatestReminderToken);
      AppendPieces(out, turn.content);
      break;
    case Role::kAssistant:
      if (s.thinking && (!s.drop || static_cast<int>(i) > s.last_user)) {
        AppendPieces(out, turn.reasoning);
        AppendControl(out, kThinkEndToken);
      }
      AppendPieces(out, turn.content);
      if (!turn.tool_calls.empty()) AppendToolCallsBlock(out, s.dialect.tags, turn.tool_calls);
      AppendControl(out, kEosToken);
      break;
    case Role::kTool:
      FS_CHECK(false, "tool turns are merged before rendering");
  }
  const bool followed_by_reply = i + 1 == turns.size() || turns[i + 1].role == Role::kAssistant ||
                                 turns[i + 1].role == Role::kLatestReminder;
  if (followed_by_reply && IsUserTurn(turns, i, s.dialect)) {
    AppendControl(out, kAssistantToken);
    const bool open_thinking = s.thinking && (!s.drop || static_cast<int>(i) >= s.last_user);
    AppendControl(out, open_thinking ? kThinkStartToken : kThinkEndToken);
  }
  return base::Status::Ok();
}

}  // namespace

bool ThinkingEnabled(const protocol::ChatRequest& request) {
  return request.thinking.value_or(true);
}

bool ToolsRendered(const protocol::ChatRequest& request) {
  return !request.tools.empty() && request.tool_choice.mode != protocol::ToolChoiceMode::kNone;
}

void AttachRequestSections(const protocol::ChatRequest& request,
                           std::vector<std::string> tool_schemas, std::vector<Turn>& turns) {
  std::string response_format;
  const auto& format = request.response_format;
  if (format.is_object() && !format.empty()) {
    auto type = format.find("type");
    const bool is_text = type != format.end() && type->is_string() && *type == "text";
    if (!is_text) response_format = PythonJsonDumps(format);
  }
  if (tool_schemas.empty() && response_format.empty()) return;
  if (turns.empty() || turns.front().role != Role::kSystem) {
    Turn system;
    system.role = Role::kSystem;
    turns.insert(turns.begin(), std::move(system));
  }
  turns.front().tool_schemas = std::move(tool_schemas);
  turns.front().response_format = std::move(response_format);
}

base::Result<EncodedPrompt> RenderConversation(std::vector<Turn> turns, const Dialect& dialect,
                                               bool thinking) {
  turns = MergeUserTurns(std::move(turns));
  SortToolResults(turns);
  const bool drop = std::none_of(turns.begin(), turns.end(),
                                 [](const Turn& t) { return !t.tool_schemas.empty(); });
  if (thinking && drop) turns = DropOldReasoning(std::move(turns), dialect);
  const RenderState state{dialect, thinking, drop, LastUserIndex(turns, dialect)};
  PieceList pieces;
  AppendControl(pieces, kBosToken);
  for (size_t i = 0; i < turns.size(); ++i) FS_RETURN_IF_ERROR(RenderTurn(turns, i, state, pieces));
  return MakePrompt(std::move(pieces));
}

base::Error MessageError(size_t index, std::string_view what) {
  return base::MakeError(base::ErrorCode::kBadChatRequest,
                         fmt::format("messages[{}]: {}", index, what));
}

base::Status CheckNoPlaceholder(std::string_view text, size_t index, std::string_view field) {
  if (text.find(kImageToken) == std::string_view::npos) return base::Status::Ok();
  return MessageError(index, fmt::format("{} contains the image placeholder '{}'; send images as "
                                         "image content parts",
                                         field, kImageToken));
}

base::Status CheckParts(const protocol::ChatMessage& message, size_t index) {
  const auto& content = message.content;
  if (content.kind == protocol::ContentKind::kText) {
    FS_RETURN_IF_ERROR(CheckNoPlaceholder(content.text, index, "content"));
  }
  if (message.reasoning_content.has_value()) {
    FS_RETURN_IF_ERROR(CheckNoPlaceholder(*message.reasoning_content, index, "reasoning_content"));
  }
  if (content.kind != protocol::ContentKind::kParts) return base::Status::Ok();
  for (size_t i = 0; i < content.parts.size(); ++i) {
    const protocol::ContentPart& part = content.parts[i];
    if (part.type == protocol::PartType::kText) {
      FS_RETURN_IF_ERROR(CheckNoPlaceholder(part.text, index, fmt::format("content[{}]", i)));
    }
    if (part.type == protocol::PartType::kImage && part.image_source.empty()) {
      return MessageError(index, fmt::format("content[{}]: image part has no source", i));
    }
  }
  return base::Status::Ok();
}

}  // namespace flashserve::encoding
