// OpenAI wire format for the benchmark client: chat/completions request bodies, streamed-chunk
// parsing, and StreamAccumulator (one response -> token times, text, usage). Used by runner.
// Functions are pure; a StreamAccumulator belongs to one request (not thread-safe).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "net/sse_parser.h"

namespace flashserve::loadgen {

enum class ApiKind { kChat, kCompletions };

// "/v1/chat/completions" or "/v1/completions".
std::string_view ApiPath(ApiKind api);

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
  std::vector<std::string> images;  // chat: image_url parts (data URLs) after the text
};

struct SamplingParams {
  std::string model;
  int64_t max_tokens = 128;
  double temperature = 0.0;
  std::optional<uint64_t> seed;  // sent as "seed" when set
  bool ignore_eos = false;       // sent as "ignore_eos": true (vLLM-style servers honour it)
};

// A streaming request body with "stream_options": {"include_usage": true}. For kCompletions the
// prompt is the message contents joined with "\n" (roles dropped).
std::string BuildRequestBody(ApiKind api, const SamplingParams& params, const std::vector<Message>& messages);
// The same for /v1/completions with the prompt sent as token ids (no tokenizer on the server
// can change them): "prompt": [id, ...].
std::string BuildTokenPromptBody(const SamplingParams& params, std::span<const int32_t> prompt_ids);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // prompt_tokens_details.cached_tokens (OpenAI) or prompt_cache_hit_tokens (DeepSeek); the
  // larger when both are present, 0 when neither is.
  int64_t cached_tokens = 0;
};

// One `data:` payload of a streamed response.
struct StreamChunk {
  bool done = false;       // the "[DONE]" sentinel
  bool has_token = false;  // carries generated output: content, reasoning, tool-call or text delta
  std::string text;        // content (chat) or text (completions)
  std::optional<Usage> usage;
  std::optional<std::string> error;  // an in-stream error object's message
};

// kInvalidArgument when the payload is not a JSON object (or "[DONE]").
base::Result<StreamChunk> ParseStreamChunk(std::string_view data);

// The message of an OpenAI-style error body ({"error": {"message": ...}}), else the body itself
// trimmed to 200 bytes.
std::string ErrorBodyMessage(std::string_view body);

// Feeds body pieces of one 200 streaming response through SSE and chunk parsing, stamping each
// chunk with the arrival time of the piece that completed it. The first token-carrying chunk
// sets first_token_s; every later one adds one inter-token gap (0 for chunks that arrived in
// the same piece as the previous one).
class StreamAccumulator {
 public:
  void OnBytes(std::string_view bytes, double now_s);

  std::optional<double> first_token_s() const { return first_token_s_; }
  const std::vector<double>& itl_s() const { return itl_s_; }
  int64_t num_token_chunks() const { return num_token_chunks_; }
  const std::string& text() const { return text_; }
  const std::optional<Usage>& usage() const { return usage_; }
  const std::optional<std::string>& error() const { return error_; }
  bool done() const { return done_; }

 private:
  net::SseParser sse_;
  std::vector<std::string> events_;
  std::optional<double> first_token_s_;
  double last_token_s_ = 0.0;
  std::vector<double> itl_s_;
  int64_t num_token_chunks_ = 0;
  std::string text_;
  std::optional<Usage> usage_;
  std::optional<std::string> error_;
  bool done_ = false;
};

}  // namespace flashserve::loadgen
