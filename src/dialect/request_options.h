// The generation fields of a chat or text completion body (model, stream, n, max_tokens, stop,
// seed, sampling, logprobs, ...) -> GenerationOptions; messages are protocol/chat_json.h's job.
// Callers: the generation routes. Pure functions, any thread; a bad field is a 400 naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/api_error.h"
#include "protocol/sampling.h"

namespace flashserve::dialect {

enum class Dialect { kChat, kCompletion };

inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxChoices = 128;

struct GenerationOptions {
  std::string model;
  bool stream = false;
  bool include_usage = false;             // stream_options.include_usage
  int n = 1;
  std::optional<int64_t> max_tokens;      // max_completion_tokens, else max_tokens; absent = server default
  std::vector<std::string> stop;          // stop strings (text level)
  std::vector<int32_t> stop_token_ids;    // extension (vLLM): stop on these ids
  bool ignore_eos = false;                // extension (vLLM)
  protocol::SamplingParams sampling;      // temperature, top_p, top_k, min_p, penalties, bias, seed, logprobs
  std::string user;
  std::string cache_ttl;                  // extension: KV-store retention class ("agent", "chat", ...)
  std::optional<int64_t> reasoning_budget;  // thinking.budget_tokens: </think> is forced after this many
};

// Reads the fields above from a JSON object body. `vocab_size` bounds logit_bias and stop ids.
// Chat: `logprobs` is a bool and `top_logprobs` 0..20 (needs logprobs). Completions: `logprobs`
// is an integer 0..5 (the number of alternatives). Returns the first bad field, or nullopt.
std::optional<net::ApiError> ParseGenerationOptions(const nlohmann::ordered_json& body, Dialect dialect,
                                               int64_t vocab_size, GenerationOptions* out);

// Parses request text as JSON: a 400 "invalid JSON" ApiError (with the parser's position) for
// syntax errors, and for a top level that is not an object.
std::optional<net::ApiError> ParseJsonBody(const std::string& text, nlohmann::ordered_json* out);

// "expected a number, got string"-style description of a JSON value's type.
const char* JsonTypeName(const nlohmann::ordered_json& value);

}  // namespace flashserve::dialect
