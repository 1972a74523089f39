// The structured-output fields of a request -> one protocol::OutputConstraint, checked by
// compiling it through the shared grammar cache. Every error is a 400 naming the field, down to
// the schema keyword (`response_format.json_schema.schema.properties.tags.uniqueItems`).
// Pure functions plus the thread-safe cache; any thread.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar_cache.h"
#include "encoding/version.h"
#include "net/api_error.h"
#include "protocol/chat.h"
#include "protocol/generate.h"

namespace flashserve::api {

struct ConstraintSource {
  protocol::OutputConstraint constraint;
  std::string param;  // where it came from, e.g. "response_format.json_schema.schema", "guided_regex"
};

// Chat Completions (`chat`) and Completions: `response_format` (chat only), vLLM's
// `structured_outputs` and `guided_json` / `guided_regex` / `guided_choice` / `guided_grammar`,
// SGLang's `regex` / `ebnf` / `json_schema`. At most one may be set.
std::optional<net::ApiError> ReadConstraintFields(const nlohmann::ordered_json& body, bool chat, ConstraintSource* out);

// A response_format-shaped object ({"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"schema": ...}}) whose schema sits at `schema_param` in the request (the
// Responses and Messages dialects translate theirs to this shape). "text" and null: none.
void ConstraintFromResponseFormat(const nlohmann::ordered_json& format, const std::string& schema_param,
                                  ConstraintSource* out);

// The tool calls a request forces or holds to schemas (tool_choice "required" or a named tool,
// parallel calls off, strict tools) as a kToolCalls constraint (grammar/tool_calls.h); nothing
// when the tools are free. A second constraint beside another one is a 400 naming `tools`.
std::optional<net::ApiError> ToolCallConstraint(const protocol::ChatRequest& chat, encoding::EncodingVersion version,
                                                ConstraintSource* out);

// Compiles the constraint (once per distinct text); a 400 naming the offending part otherwise.
std::optional<net::ApiError> CheckConstraint(grammar::GrammarCache* cache, const ConstraintSource& source);

}  // namespace flashserve::api
