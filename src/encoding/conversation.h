// Internal to the encoding room: the conversation model both encoders convert a request into,
// and everything after that conversion that V4 and V4.1 share (tool results merged into user
// turns and re-sorted into call order, old reasoning dropped, turns rendered into pieces).
// Callers: encoder_v4.cc, encoder_v41.cc. Plain values and pure functions, any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "encoding/dsml.h"
#include "encoding/encoder.h"
#include "encoding/prompt.h"
#include "protocol/chat.h"

namespace flashserve::encoding {

// One element of a user turn.
struct Block {
  enum class Kind { kText, kToolResult, kUnsupported };
  Kind kind = Kind::kText;
  PieceList content;        // kText, kToolResult
  std::string tool_use_id;  // kToolResult: the tool message's tool_call_id
  std::string type_name;    // kUnsupported: rendered as "[Unsupported <type_name>]"
};

// One request message after per-version conversion. A tool message arrives as role kTool with
// a single kToolResult block; RenderConversation merges it into the user turn before it.
struct Turn {
  protocol::Role role = protocol::Role::kUser;
  PieceList content;                        // system, developer, assistant, latest_reminder
  std::vector<Block> blocks;                // user, tool
  PieceList reasoning;                      // assistant
  std::vector<DsmlCall> tool_calls;         // assistant
  std::vector<std::string> call_ids;        // assistant, parallel to tool_calls ("" = no id)
  std::vector<std::string> tool_schemas;    // tools section, one JSON line per tool
  std::string response_format;              // JSON text; "" when none
  std::optional<base::Error> render_error;  // fails the request only if the turn is rendered
};

// What differs between the versions once messages are converted.
struct Dialect {
  DsmlTags tags;
  // V4.1: <｜System｜> leads the first turn when it is a system turn or carries the effort
  // prefix, and every later system turn; a later system turn counts as a user turn.
  bool system_token = false;
  bool developer_is_user = false;  // V4: developer turns count as user turns
  std::string effort_prefix;       // text put first in thinking mode ("" = none)
};

// Tools are rendered unless the list is empty or tool_choice is "none".
bool ToolsRendered(const protocol::ChatRequest& request);

// Puts the tools section and response format on the first turn, inserting an empty system turn
// first when the conversation does not start with one (and there is something to attach).
void AttachRequestSections(const protocol::ChatRequest& request,
                           std::vector<std::string> tool_schemas, std::vector<Turn>& turns);

// Merges, sorts, drops and renders (BOS first). Fails with the first rendered turn's error.
base::Result<EncodedPrompt> RenderConversation(std::vector<Turn> turns, const Dialect& dialect,
                                               bool thinking);

// kBadChatRequest "messages[<index>]: <what>".
base::Error MessageError(size_t index, std::string_view what);

// The checks both releases make where pictures are rendered: no text (content, a text part,
// reasoning_content) holds the image placeholder, and every image part has a source.
base::Status CheckNoPlaceholder(std::string_view text, size_t index, std::string_view field);
base::Status CheckParts(const protocol::ChatMessage& message, size_t index);

// DSML parameters from an arguments object: strings raw (string="true"), other values as
// Python JSON (string="false"), in key order.
std::vector<DsmlParam> ParamsFromObject(const nlohmann::ordered_json& arguments);

// The per-version entry points behind EncodeChat (encoder_v4.cc, encoder_v41.cc).
base::Result<EncodedPrompt> EncodeV4(const protocol::ChatRequest& request, bool picture_parts);
base::Result<EncodedPrompt> EncodeV41(const protocol::ChatRequest& request);

}  // namespace flashserve::encoding
