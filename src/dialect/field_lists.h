// The top-level request fields of each generation route: implemented (they change what is
// generated or returned, or are refused with a reason for a value that cannot be honoured) and
// hints (accepted, no effect on the output, listed as such in docs/api.md). A field in neither
// list is a 400 naming it. One table per route, read by the routes and by the test that holds
// every listed field to its effect. Constants, any thread.
#pragma once

#include <span>
#include <string_view>

namespace flashserve::dialect {

struct FieldList {
  std::span<const std::string_view> implemented;
  std::span<const std::string_view> hints;
};

inline constexpr std::string_view kChatImplemented[] = {
    "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop", "seed", "n", "logprobs",
    "top_logprobs", "logit_bias", "tools", "tool_choice", "parallel_tool_calls", "response_format", "thinking",
    "reasoning_effort", "stop_token_ids", "ignore_eos", "cache_ttl", "structured_outputs", "guided_json", "guided_regex",
    "guided_choice", "guided_grammar", "regex", "ebnf", "json_schema"};
inline constexpr std::string_view kChatHints[] = {"user", "metadata", "store", "service_tier", "safety_identifier",
                                                  "prompt_cache_key"};

inline constexpr std::string_view kCompletionImplemented[] = {
    "model", "prompt", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "stop", "seed", "n", "logprobs", "logit_bias",
    "stop_token_ids", "ignore_eos", "cache_ttl", "echo", "suffix", "best_of", "structured_outputs", "guided_json",
    "guided_regex", "guided_choice", "guided_grammar", "regex", "ebnf", "json_schema"};
inline constexpr std::string_view kCompletionHints[] = {"user", "metadata", "prompt_cache_key"};

inline constexpr std::string_view kMessagesImplemented[] = {
    "model", "max_tokens", "messages", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k", "tools",
    "tool_choice", "thinking", "output_config", "context_management"};
inline constexpr std::string_view kMessagesHints[] = {"metadata", "service_tier", "cache_control"};

inline constexpr std::string_view kResponsesImplemented[] = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "reasoning",
    "max_output_tokens", "temperature", "top_p", "top_logprobs", "include", "stream", "store", "truncation",
    "previous_response_id", "background", "conversation", "prompt"};
inline constexpr std::string_view kResponsesHints[] = {"metadata", "user", "client_metadata", "service_tier",
                                                       "safety_identifier", "prompt_cache_key", "prompt_cache_retention"};

inline constexpr FieldList kChatFields{kChatImplemented, kChatHints};
inline constexpr FieldList kCompletionFields{kCompletionImplemented, kCompletionHints};
inline constexpr FieldList kMessagesFields{kMessagesImplemented, kMessagesHints};
inline constexpr FieldList kResponsesFields{kResponsesImplemented, kResponsesHints};

}  // namespace flashserve::dialect
