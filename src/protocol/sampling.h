// Sampling parameters of one request as plain data (OpenAI / DeepSeek semantics), shared by
// api (parsing), serve (per-choice seeds) and sampler (the arithmetic).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace flashserve::protocol {

struct SamplingParams {
  float temperature = 1.0f;        // 0 = greedy
  float top_p = 1.0f;              // (0, 1]
  int top_k = 0;                   // 0 = off
  float min_p = 0.0f;              // [0, 1]
  float presence_penalty = 0.0f;   // [-2, 2], on generated tokens
  float frequency_penalty = 0.0f;  // [-2, 2], on generated tokens
  float repetition_penalty = 1.0f; // (0, 2], on prompt and generated tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // [-100, 100]
  uint64_t seed = 0;               // the serving loop draws one when the request has none
  bool has_seed = false;
  int top_logprobs = 0;            // alternatives reported per token (0..20)
  bool logprobs = false;
};

}  // namespace flashserve::protocol
