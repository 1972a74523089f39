// Logits -> tokens for one row or a step's batch of rows (design.md section 3): logit bias, repetition / presence /
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
#include "protocol/generate.h"
#include "protocol/sampling.h"

namespace flashserve::sampler {

using SamplingParams = protocol::SamplingParams;

// Checks ranges (OpenAI limits); vocab_size bounds logit_bias ids.
base::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

// Token counts the penalties need, maintained by the caller as tokens are generated.
struct TokenHistory {
  std::unordered_map<int32_t, int32_t> output_counts;  // generated tokens -> count
  std::vector<int32_t> prompt_tokens_sorted;           // unique prompt ids, ascending
  void AddOutput(int32_t token) { ++output_counts[token]; }
  void SetPrompt(std::span<const int32_t> prompt);
};

using TokenLogprob = protocol::TokenLogprob;

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;                     // of the chosen token (if requested)
  std::vector<TokenLogprob> top_logprobs;   // best first (if requested)
};

// allowed: optional bitmask over the vocabulary (bit i set = token i allowed), or empty.
// position: absolute position of the token being chosen. scratch is reused between calls.
SampleResult Sample(std::span<const float> logits, const SamplingParams& params, const TokenHistory& history,
                    int64_t position, std::span<const uint32_t> allowed, std::vector<float>* scratch);

// One row of a batch: the logits of one position with the parameters, history and allowed-token
// mask (empty = every token) of the sequence it belongs to. A sequence may have several rows
// (speculative verification) and rows may share logits (n choices forked from one prefill).
struct SampleRow {
  std::span<const float> logits;
  const SamplingParams* params = nullptr;
  const TokenHistory* history = nullptr;
  int64_t position = 0;
  std::span<const uint32_t> allowed;
};

// Samples every row of a step; result i is what Sample() gives row i alone (rows are
// independent: neither the batch nor the order changes a token).
std::vector<SampleResult> SampleBatch(std::span<const SampleRow> rows, std::vector<float>* scratch);

}  // namespace flashserve::sampler
