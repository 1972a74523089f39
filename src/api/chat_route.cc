// POST /v1/chat/completions: body -> ChatRequest -> DeepSeek prompt -> token ids -> job
// (api/routes.h). Every field is implemented, a documented hint, or a 400 naming it.
#include <optional>

#include <fmt/format.h>

#include "api/routes.h"
#include "encoding/encoder.h"
#include "net/api_error.h"
#include "protocol/chat_json.h"

namespace flashserve::api {

namespace {

const Json* Find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// The fields this route implements, the hints it accepts, and the ones it cannot honour yet.
std::optional<net::ApiError> CheckChatFields(const Json& body) {
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
std::optional<net::ApiError> ReadBudget(const Json& body, GenerationOptions* options) {
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

// DeepSeek's API answers 400 when an assistant turn that called tools comes back without the
// reasoning it was returned with (thinking mode: the prompt needs it).
std::optional<net::ApiError> MissingReasoning(const protocol::ChatRequest& chat, bool thinking) {
  if (!thinking) return std::nullopt;
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
std::optional<net::ApiError> PrefixError(const protocol::ChatRequest& chat) {
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

void HandleChatCompletions(const RouteContext& ctx, const ExchangePtr& exchange) {
  Json body;
  GenerationPlan plan;
  if (!ReadGenerationBody(ctx, *exchange, Dialect::kChat, &body, &plan.options)) return;
  auto fail = [&exchange](const net::ApiError& e) { exchange->Respond(net::ErrorResponse(e)); };
  if (auto e = CheckChatFields(body)) return fail(*e);
  if (auto e = ReadBudget(body, &plan.options)) return fail(*e);
  if (auto e = ReadConstraintFields(body, /*chat=*/true, &plan.constraint)) return fail(*e);
  base::Result<protocol::ChatRequest> chat = protocol::ChatRequestFromJson(body);
  if (!chat.ok()) return fail(ChatRequestError(chat.error()));
  if (const auto* name = std::get_if<std::string>(&chat->reasoning_effort)) {
    if (*name == "none") {  // OpenAI's name for no reasoning
      chat->thinking = false;
      chat->reasoning_effort = std::monostate();
    } else if (auto mapped = MapEffortName(*name, ctx.options.encoding_version)) {
      chat->reasoning_effort = *mapped;
    }
  }
  chat->parallel_tool_calls = body.value("parallel_tool_calls", Json(true)) != false;
  if (auto e = ToolCallConstraint(*chat, ctx.options.encoding_version, &plan.constraint)) return fail(*e);
  FlattenTextParts(*chat, ctx.options.encoding_version);
  if (auto e = PrefixError(*chat)) return fail(*e);
  if (auto e = MissingReasoning(*chat, encoding::ThinkingEnabled(*chat))) return fail(*e);
  if (auto e = EncodePrompt(ctx, *chat, &plan.prompt, &plan.images, &plan.thinking)) return fail(*e);
  plan.make_writer = [](WriterContext w) { return MakeChatWriter(std::move(w)); };
  StartGeneration(ctx, exchange, std::move(plan));
}

}  // namespace flashserve::api
