// Logits -> token for one sequence (design.md section 3): logit bias, repetition / presence /
// frequency penalties, an optional allowed-token mask (grammar hook), log-probabilities,
// then greedy or temperature sampling with top-k / top-p / min-p. Sampling is the Gumbel-max
// trick over Philox uniforms keyed by (seed, position, token id), so a token is a pure
// function of (logits, parameters, seed, position): identical alone, in any batch, after a
// cached resume. Ties break toward the lower token id. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace flashserve::sampler {

struct SamplingParams {
  float temperature = 1.0f;        // 0 = greedy
  float top_p = 1.0f;              // (0, 1]
  int top_k = 0;                   // 0 = off
  float min_p = 0.0f;              // [0, 1]
  float presence_penalty = 0.0f;   // [-2, 2], on generated tokens
  float frequency_penalty = 0.0f;  // [-2, 2], on generated tokens
  float repetition_penalty = 1.0f; // (0, 2], on prompt and generated tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // [-100, 100]
  uint64_t seed = 0;
  int top_logprobs = 0;            // alternatives reported per token (0..20)
  bool logprobs = false;
};

// Checks ranges (OpenAI limits); vocab_size bounds logit_bias ids.
base::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

// Token counts the penalties need, maintained by the caller as tokens are generated.
struct TokenHistory {
  std::unordered_map<int32_t, int32_t> output_counts;  // generated tokens -> count
  std::vector<int32_t> prompt_tokens_sorted;           // unique prompt ids, ascending
  void AddOutput(int32_t token) { ++output_counts[token]; }
  void SetPrompt(std::span<const int32_t> prompt);
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;                     // of the chosen token (if requested)
  std::vector<TokenLogprob> top_logprobs;   // best first (if requested)
};

// allowed: optional bitmask over the vocabulary (bit i set = token i allowed), or empty.
// position: absolute position of the token being chosen. scratch is reused between calls.
SampleResult Sample(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                    int64_t position, std::span<const uint32_t> allowed, std::vector<float>* scratch);

}  // namespace flashserve::sampler
