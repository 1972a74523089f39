// Chat Completions, Messages and Responses request bodies -> the one request model the
// generation core serves (a protocol::ChatRequest for the encoder plus GenerationOptions), and
// what the dialects share: the field allowlists (a field is implemented, a documented hint, or a
// 400 naming it), DeepSeek's reasoning-effort names, text-part flattening. Workers and the
// router parse with the same functions, so both build the same prompt. Pure, any thread.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "dialect/field_lists.h"
#include "dialect/reasoning_seal.h"
#include "dialect/request_options.h"
#include "encoding/version.h"
#include "net/api_error.h"
#include "protocol/chat.h"

namespace flashserve::dialect {

// Hosted tools the server does not run (web_search, Anthropic server tools).
enum class HostedTools { kDrop, kReject };

struct DialectContext {
  int64_t vocab_size = 0;
  encoding::EncodingVersion version = encoding::EncodingVersion::kV4;
  HostedTools hosted_tools = HostedTools::kDrop;
  const ReasoningSeal* seal = nullptr;
  // Sealed reasoning this process cannot open (no seal, or another key) is taken as the text
  // sent beside it (a Messages `thinking`, a Responses item's `content`), else as empty, instead
  // of refused: the router's estimate of a prompt whose exact form only the workers know.
  bool estimate_sealed = false;
};

struct DialectRequest {
  protocol::ChatRequest chat;
  GenerationOptions options;
  std::vector<std::string> dropped_tools;  // hosted tools left out of the prompt
  // Messages
  bool omit_thinking = false;  // thinking.display "omitted"
  // Responses
  bool summary = false;              // reasoning.summary: the reasoning text as summary
  bool encrypted_reasoning = false;  // include: reasoning.encrypted_content
  bool output_logprobs = false;      // include: message.output_text.logprobs
  nlohmann::ordered_json echo;       // settings the response object repeats
};

// POST /v1/chat/completions, POST /v1/messages (Anthropic) and POST /v1/responses (OpenAI,
// stateless). The structured-output fields (response_format, tool_choice's grammar) are read by
// the worker's api room; these check that every field is known.
std::optional<net::ApiError> ParseChatBody(const nlohmann::ordered_json& body, const DialectContext& ctx,
                                           DialectRequest* out);
std::optional<net::ApiError> ParseMessagesBody(const nlohmann::ordered_json& body, const DialectContext& ctx,
                                               DialectRequest* out);
std::optional<net::ApiError> ParseResponsesBody(const nlohmann::ordered_json& body, const DialectContext& ctx,
                                                DialectRequest* out);

// A 400 unsupported_parameter naming the first key of `object` that is in neither list
// (`path` prefixes the name: "tools[2]"). `hints` are accepted and documented as having no
// effect on the output.
std::optional<net::ApiError> CheckKnownFields(const nlohmann::ordered_json& object, std::string_view path,
                                              std::initializer_list<std::string_view> implemented,
                                              std::initializer_list<std::string_view> hints = {});

// The same against a route's table (dialect/field_lists.h).
std::optional<net::ApiError> CheckKnownFields(const nlohmann::ordered_json& object, const FieldList& fields);

// DeepSeek's effort names for `version`: V4 (high, max): minimal/low/medium/high -> high,
// xhigh/max -> max; V4.1 (low, high, max, 1..100): minimal/low -> low, medium/high/xhigh ->
// high, max -> max. Unknown names: nullopt.
std::optional<std::string> MapEffortName(std::string_view name, encoding::EncodingVersion version);

// V4's reference encoder takes only string content; DeepSeek's API flattens text parts first:
// a message whose parts are all text becomes their text joined by blank lines (as V4.1
// flattens them). V4.1 requests are left as they are.
void FlattenTextParts(protocol::ChatRequest& chat, encoding::EncodingVersion version);

// The sampling and length fields of a Messages or Responses body, read by the Chat Completions
// reader: `fields` pairs each dialect name with chat's ({"stop_sequences", "stop"}); an error
// names the dialect's field.
using FieldName = std::pair<const char*, const char*>;
std::optional<net::ApiError> ParseDialectGeneration(const nlohmann::ordered_json& body,
                                                    std::initializer_list<FieldName> fields, int64_t vocab_size,
                                                    GenerationOptions* out);

// A protocol::ChatRequestFromJson or encoder error (kBadChatRequest, "messages[2].content: ...")
// as a 400 whose param is the path the message starts with.
net::ApiError ChatRequestError(const base::Error& error);

// "name: what" 400 with param `name` and code unsupported_parameter.
net::ApiError Unsupported(const std::string& name, const std::string& what);

}  // namespace flashserve::dialect
