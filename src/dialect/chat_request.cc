// Chat Completions body -> DialectRequest (dialect/dialect_request.h): generation fields, the
// field allowlist, thinking budget, effort names, text-part flattening, and DeepSeek's checks of
// prefix completion and reasoning hand-back.
#include <fmt/format.h>

#include "dialect/dialect_request.h"
#include "dialect/json_fields.h"
#include "encoding/encoder.h"
#include "protocol/chat_json.h"

namespace flashserve::dialect {
namespace {

using namespace json_fields;  // NOLINT: the room's small JSON reading vocabulary

// The fields the route implements, the hints it accepts, and the ones it cannot honour yet.
Error CheckChatFields(const Json& body) {
  if (auto e = CheckKnownFields(body, kChatFields)) return e;
  if (const Json* store = Find(body, "store"); store != nullptr && *store == true)
    return Unsupported("store", "this server keeps no completions (send false or leave it out)");
  if (const Json* p = Find(body, "parallel_tool_calls"); p != nullptr && !p->is_boolean())
    return net::InvalidRequest("parallel_tool_calls: expected a boolean", "parallel_tool_calls");
  if (const Json* tools = Find(body, "tools"); tools != nullptr && tools->is_array()) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      if (auto e = CheckKnownFields(t, fmt::format("tools[{}]", i), {"type", "function", "namespace"})) return e;
      const Json* fn = t.is_object() ? Find(t, "function") : nullptr;
      if (fn != nullptr)
        if (auto e = CheckKnownFields(*fn, fmt::format("tools[{}].function", i), {"name", "description", "parameters", "strict", "namespace"}))
          return e;
    }
  }
  if (const Json* thinking = Find(body, "thinking"))
    if (auto e = CheckKnownFields(*thinking, "thinking", {"type", "budget_tokens"})) return e;
  if (const Json* messages = Find(body, "messages"); messages != nullptr && messages->is_array()) {
    for (size_t i = 0; i < messages->size(); ++i) {
      if (auto e = CheckKnownFields((*messages)[i], fmt::format("messages[{}]", i),
                                    {"role", "content", "tool_calls", "tool_call_id", "reasoning_content", "prefix"},
                                    {"name", "refusal", "annotations", "audio"}))
        return e;
    }
  }
  return std::nullopt;
}

// thinking.budget_tokens (enabled thinking only).
Error ReadBudget(const Json& body, GenerationOptions* options) {
  const Json* thinking = Find(body, "thinking");
  const Json* budget = thinking != nullptr && thinking->is_object() ? Find(*thinking, "budget_tokens") : nullptr;
  if (budget == nullptr) return std::nullopt;
  const Json* type = Find(*thinking, "type");
  if (type == nullptr || *type == "disabled")
    return net::InvalidRequest("thinking.budget_tokens: only with thinking.type \"enabled\"", "thinking.budget_tokens");
  if (!budget->is_number_integer() || budget->get<int64_t>() < 1)
    return net::InvalidRequest("thinking.budget_tokens: a positive integer is required", "thinking.budget_tokens");
  options->reasoning_budget = budget->get<int64_t>();
  return std::nullopt;
}

// reasoning_effort: OpenAI's "none" turns thinking off; other OpenAI names map to DeepSeek's.
void MapEffort(encoding::EncodingVersion version, protocol::ChatRequest* chat) {
  const auto* name = std::get_if<std::string>(&chat->reasoning_effort);
  if (name == nullptr) return;
  if (*name == "none") {
    chat->thinking = false;
    chat->reasoning_effort = std::monostate();
  } else if (auto mapped = MapEffortName(*name, version)) {
    chat->reasoning_effort = *mapped;
  }
}

// DeepSeek's API answers 400 when an assistant turn that called tools comes back without the
// reasoning it was returned with (thinking mode: the prompt needs it).
Error MissingReasoning(const protocol::ChatRequest& chat) {
  if (!encoding::ThinkingEnabled(chat)) return std::nullopt;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const protocol::ChatMessage& m = chat.messages[i];
    if (m.role == protocol::Role::kAssistant && !m.tool_calls.empty() && !m.reasoning_content)
      return net::InvalidRequest(
          fmt::format("messages[{}].reasoning_content: missing; in thinking mode an assistant message with tool_calls "
                      "must be sent back with the reasoning_content it was returned with",
                      i),
          fmt::format("messages[{}].reasoning_content", i), "missing_reasoning_content");
  }
  return std::nullopt;
}

// DeepSeek's chat prefix completion: `prefix: true` on the last message, an assistant message,
// continues it; a final assistant message without it would render as a finished turn.
Error PrefixError(const protocol::ChatRequest& chat) {
  const size_t last = chat.messages.size() - 1;
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const protocol::ChatMessage& m = chat.messages[i];
    const std::string field = fmt::format("messages[{}].prefix", i);
    if (m.prefix && (i != last || m.role != protocol::Role::kAssistant))
      return net::InvalidRequest(field + ": only the last message, an assistant message, can be a prefix", field);
    if (i == last && m.role == protocol::Role::kAssistant && !m.prefix)
      return net::InvalidRequest(field + ": a final assistant message is continued only with prefix: true", field);
  }
  return std::nullopt;
}

}  // namespace

net::ApiError ChatRequestError(const base::Error& error) {
  const std::string& m = error.message();
  const size_t colon = m.find(": ");
  const bool is_path = colon != std::string::npos && m.find(' ') > colon;
  return net::FromError(error, is_path ? m.substr(0, colon) : "");
}

std::optional<net::ApiError> ParseChatBody(const nlohmann::ordered_json& body, const DialectContext& ctx,
                                           DialectRequest* out) {
  if (auto e = ParseGenerationOptions(body, Dialect::kChat, ctx.vocab_size, &out->options)) return e;
  if (auto e = CheckChatFields(body)) return e;
  if (auto e = ReadBudget(body, &out->options)) return e;
  base::Result<protocol::ChatRequest> chat = protocol::ChatRequestFromJson(body);
  if (!chat.ok()) return ChatRequestError(chat.error());
  out->chat = std::move(chat).value();
  MapEffort(ctx.version, &out->chat);
  out->chat.parallel_tool_calls = body.value("parallel_tool_calls", Json(true)) != false;
  FlattenTextParts(out->chat, ctx.version);
  if (auto e = PrefixError(out->chat)) return e;
  return MissingReasoning(out->chat);
}

}  // namespace flashserve::dialect
