// A generation request as the serving loop sees it (already encoded to token ids) and the
// events it streams back, plus usage accounting. Plain data shared by api, serve, router and
// meter; no JSON, no engine types.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/sampling.h"

namespace flashserve::protocol {

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "cancelled", "error"

// A picture in the prompt, ready for the tower: its placeholder span (prompt positions
// [start, start + roles.size())), the aligner row each image position takes, the content key
// that names it in the caches, and the normalised patches the tower reads.
struct ImageInput {
  int64_t start = 0;
  std::vector<uint8_t> roles;      // vision::SpanRole values (0 start, 1 pad, 2 image, 3 newline, 4 end)
  std::vector<int32_t> image_rows;  // per image position: its aligner output row
  std::array<uint8_t, 32> key{};   // vision::ContentKey
  int vit_h = 0, vit_w = 0;        // patch grid
  std::vector<float> patches;      // [vit_h * vit_w][3 * patch * patch]
};

// Structured output: the language a choice's answer must belong to. With thinking on, the
// reasoning before `think_end_token` is free and the constraint applies after it.
enum class ConstraintKind : uint8_t { kNone, kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kToolCalls };
const char* ConstraintKindName(ConstraintKind kind);  // "json_schema", "json_object", ...

struct OutputConstraint {
  ConstraintKind kind = ConstraintKind::kNone;
  // The schema (JSON text), the regex, the EBNF grammar, a JSON array of choices, or the tool
  // calls' spec (grammar/tool_calls.h).
  std::string text;
  bool active() const { return kind != ConstraintKind::kNone; }
};

struct GenerateRequest {
  std::string id;                      // unique per server (api assigns "chatcmpl-...")
  std::vector<int32_t> prompt;         // token ids, BOS included when the encoder adds it
  SamplingParams sampling;
  int n = 1;                           // choices; choice i samples with seed + i
  int64_t max_tokens = 256;            // generated tokens per choice
  std::vector<int32_t> stop_token_ids; // in addition to EOS unless ignore_eos
  bool ignore_eos = false;
  std::string cache_namespace;         // prefix-cache isolation (tenant); "" = the default namespace
  std::string ttl_class;               // KV-store retention class; "" = the server default
  // Disaggregated serving: the prompt tokens the prefill worker found in its own cache (its
  // accounting is authoritative for the usage); -1 = not disaggregated.
  int64_t prefill_cached_tokens = -1;
  // Disaggregated prefill: emit an event each time the prompt's state is persisted into the
  // prefix cache (GenerateEvent::persisted_tokens), so it can be shipped while prefill proceeds.
  bool report_persisted = false;
  // Thinking budget: once a choice has generated this many tokens without `think_end_token`,
  // its next token is `think_end_token` (the reasoning closes; the answer follows); before that
  // the choice cannot end (EOS is masked), so a budget always leaves room for an answer. -1 = none.
  int64_t reasoning_budget = -1;
  int32_t think_end_token = -1;
  // Pictures, in prompt order; their spans' tokens are already in `prompt`.
  std::vector<ImageInput> images;
  // The grammar every choice's answer follows (after `think_end_token` when the prompt opened
  // a reasoning block: `constrain_after_think`).
  OutputConstraint constraint;
  bool constrain_after_think = false;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenOutput {
  int32_t token = 0;
  float logprob = 0.0f;                    // when requested
  std::vector<TokenLogprob> top_logprobs;  // when requested, best first
};

// Prompt tokens split by where they came from; hit + miss = prompt_tokens.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;   // prompt_cache_hit_tokens = sum of the tiers below
  int64_t cached_memory = 0;   // device / host DRAM
  int64_t cached_disk = 0;     // local disk tier
  int64_t cached_shared = 0;   // shared tier
  int64_t cached_prefill = 0;  // disaggregated: counted by the prefill worker (tiers above are 0)
  int64_t speculative_drafted = 0;   // draft tokens verified for this request
  int64_t speculative_accepted = 0;  // of them, accepted (emitted without a forward of their own)
  int64_t cache_miss_tokens() const { return prompt_tokens - cached_tokens; }
};

// One step of one choice. The last event of a choice has finish != kNone; the last event of
// the request has request_done = true and carries the usage of all choices.
struct GenerateEvent {
  int choice = 0;
  std::vector<TokenOutput> tokens;  // new tokens (may be empty on the final event)
  FinishReason finish = FinishReason::kNone;
  bool request_done = false;
  std::string error;                // when finish == kError
  Usage usage;                      // when request_done
  int64_t persisted_tokens = 0;     // > 0: the prompt's state up to here is in the prefix cache
};

}  // namespace flashserve::protocol
