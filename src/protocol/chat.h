// Plain chat-completion request types (OpenAI Chat Completions plus DeepSeek's `thinking`
// switch), shared by api, encoding and app. Plain values with no behaviour: copy freely, read
// from any thread. Parsing from JSON lives in protocol/chat_json.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashserve::protocol {

enum class Role { kSystem, kDeveloper, kUser, kAssistant, kTool, kLatestReminder };

// "system", "developer", "user", "assistant", "tool", "latest_reminder".
std::string_view RoleName(Role role);
std::optional<Role> RoleFromName(std::string_view name);

enum class PartType { kText, kImage, kOther };

// One element of an array-valued `content`.
struct ContentPart {
  PartType type = PartType::kText;
  std::string type_name;     // the part's "type" as sent: "text", "image_url", "input_audio", ...
  std::string text;          // kText
  std::string image_source;  // kImage: the URL (or data URL); for an "image" part the source
                             // JSON. Empty when the part names no source.
  std::string field_path;    // kImage: where the request had it ("messages[1].content[0]"), for errors
};

// `content` distinguishes absent from null because the reference encoders treat them apart.
enum class ContentKind { kAbsent, kNull, kText, kParts };

struct MessageContent {
  ContentKind kind = ContentKind::kAbsent;
  std::string text;                // kText
  std::vector<ContentPart> parts;  // kParts (may be empty)
};

// An assistant tool call from the conversation history.
struct ToolCall {
  std::string id;                    // "" when absent
  std::string name;                  // function.name
  nlohmann::ordered_json arguments;  // function.arguments as sent: normally a JSON-encoded
                                     // string, but an object (or any JSON value) is kept as is
};

struct ChatMessage {
  Role role = Role::kUser;
  MessageContent content;
  std::optional<std::string> reasoning_content;  // assistant; nullopt when absent or null
  std::vector<ToolCall> tool_calls;              // assistant
  std::optional<std::string> tool_call_id;       // tool
  std::optional<std::string> name;               // optional participant name (not rendered)
  bool prefix = false;                           // assistant, last message: continue it (DeepSeek)
};

struct ToolSpec {
  std::string name;                       // function.name, copied for lookups
  nlohmann::ordered_json function;        // the "function" object exactly as sent
  nlohmann::ordered_json tool_namespace;  // the tool's "namespace" field; null when absent
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kFunction };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function_name;  // kFunction only
};

// `reasoning_effort`: absent, a named level ("low", "high", "max", ...) or an integer budget.
// Which values are valid depends on the model version; the encoder decides.
using ReasoningEffort = std::variant<std::monostate, std::string, int64_t>;

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;         // false: at most one call per answer
  nlohmann::ordered_json response_format;  // the object as sent; null when absent
  std::optional<bool> thinking;            // {"thinking": {"type": "enabled"|"disabled"}}
  ReasoningEffort reasoning_effort;
};

}  // namespace flashserve::protocol
