// Test-only: what a request's events say (tokens and log-probs per choice, finish reasons, usage)
// and a seeded request with log-probs, for tests that drive an EngineLoop.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "protocol/generate.h"
#include "serve/service.h"

namespace flashserve::serve::testing {

struct Collected {
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, std::vector<float>> logprobs;
  std::map<int, protocol::FinishReason> finish;
  protocol::Usage usage;
  bool done = false;
  std::string error;
};

inline EventSink Collect(Collected* out) {
  return [out](const protocol::GenerateEvent& e) {
    for (const auto& t : e.tokens) {
      out->tokens[e.choice].push_back(t.token);
      out->logprobs[e.choice].push_back(t.logprob);
    }
    if (e.finish != protocol::FinishReason::kNone) out->finish[e.choice] = e.finish;
    if (!e.error.empty()) out->error = e.error;
    if (e.request_done) {
      out->done = true;
      out->usage = e.usage;
    }
  };
}

inline protocol::GenerateRequest Request(std::string id, std::vector<int32_t> prompt, int max_tokens, uint64_t seed) {
  protocol::GenerateRequest r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.seed = seed;
  r.sampling.has_seed = true;
  r.sampling.logprobs = true;
  return r;
}

}  // namespace flashserve::serve::testing
