// JSON shapes of responses: usage (OpenAI + DeepSeek cache fields), token logprobs, Chat
// Completions responses and stream chunks, text completions. Callers: GenerationJob and tests.
// Pure functions, any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/generate.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::api {

using Json = nlohmann::ordered_json;

// The fields every response (and every stream chunk) repeats.
struct ResponseMeta {
  std::string id;      // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0; // Unix seconds
  std::string model;
  std::string system_fingerprint;
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}, "prompt_cache_hit_tokens", "prompt_cache_miss_tokens"}; hit + miss =
// prompt_tokens. With `reasoning_tokens`: "completion_tokens_details": {"reasoning_tokens"}.
Json UsageJson(const protocol::Usage& usage, const int64_t* reasoning_tokens = nullptr);

// Chat logprobs entry: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
// "bytes"}]} (top_logprobs empty unless requested).
Json ChatLogprobEntry(const tokenizer::Tokenizer& tokenizer, const protocol::TokenOutput& token);

// {"id", "object": "chat.completion.chunk", "created", "model", "system_fingerprint",
// "choices": choices}, plus "usage": null when `usage_null` (stream_options.include_usage).
Json ChatChunk(const ResponseMeta& meta, Json choices, bool usage_null);
// {"id", "object": "chat.completion", ..., "choices", "usage"}.
Json ChatCompletion(const ResponseMeta& meta, Json choices, const protocol::Usage& usage);
// {"id", "object": "text_completion", ..., "choices"} (+ usage when given; null in chunks
// when `usage_null`).
Json TextCompletion(const ResponseMeta& meta, Json choices, const protocol::Usage* usage, bool usage_null);


// Compact JSON text; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string Dump(const Json& value);

// Unique response ids: prefix + 24 hex digits (random per process, then a counter). Thread-safe.
class IdSource {
 public:
  IdSource();
  std::string Next(const char* prefix);

 private:
  uint64_t base_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace flashserve::api
