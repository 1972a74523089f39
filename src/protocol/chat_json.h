// Parses an OpenAI-style chat-completion request body into protocol::ChatRequest. Callers: api
// and the encode-chat CLI. Pure functions, any thread; never throw. Every malformed field is a
// kBadChatRequest whose message names the field path, e.g. "messages[2].tool_calls[0].function:
// expected an object, got string". Unknown fields are ignored.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "protocol/chat.h"

namespace flashserve::protocol {

// JSON text -> request. Text that is not JSON (including invalid UTF-8) is a kBadChatRequest.
base::Result<ChatRequest> ParseChatRequest(std::string_view json_text);

// Already-parsed body -> request.
base::Result<ChatRequest> ChatRequestFromJson(const nlohmann::ordered_json& body);

}  // namespace flashserve::protocol
