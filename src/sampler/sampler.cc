// Sampling (sampler/sampler.h).
#include "sampler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sampler/philox.h"

namespace flashserve::sampler {

using base::Error;
using base::ErrorCode;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool Better(const float* v, int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); }

void ApplyAdjustments(const SamplingParams& p, const TokenHistory& h, std::span<const uint32_t> allowed, float* x,
                      int64_t vocab) {
  if (!allowed.empty())
    for (int64_t i = 0; i < vocab; ++i)
      if (!((allowed[i / 32] >> (i % 32)) & 1u)) x[i] = kNegInf;
  for (const auto& [id, bias] : p.logit_bias) x[id] += bias;
  if (p.repetition_penalty != 1.0f) {
    auto penalize = [&](int32_t id) { x[id] = x[id] > 0 ? x[id] / p.repetition_penalty : x[id] * p.repetition_penalty; };
    for (int32_t id : h.prompt_tokens_sorted) penalize(id);
    for (const auto& [id, count] : h.output_counts)
      if (!std::binary_search(h.prompt_tokens_sorted.begin(), h.prompt_tokens_sorted.end(), id)) penalize(id);
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    for (const auto& [id, count] : h.output_counts)
      x[id] -= p.frequency_penalty * static_cast<float>(count) + (count > 0 ? p.presence_penalty : 0.0f);
}

// The lowest id of the largest value: its value in a branch-free pass, then the first id
// holding it (no copy, no data-dependent branch in the long pass).
int32_t Argmax(const float* x, int64_t vocab) {
  float m = x[0];
  for (int64_t i = 1; i < vocab; ++i) m = x[i] > m ? x[i] : m;
  for (int64_t i = 0; i < vocab; ++i)
    if (x[i] == m) return static_cast<int32_t>(i);
  return 0;  // x[0] is NaN
}

bool Adjusts(const SamplingParams& p, std::span<const uint32_t> allowed) {
  return !allowed.empty() || !p.logit_bias.empty() || p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
         p.frequency_penalty != 0.0f;
}

void FillLogprobs(const SamplingParams& p, const float* x, int64_t vocab, int32_t token, SampleResult* out) {
  const float m = x[Argmax(x, vocab)];
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) total += std::exp(static_cast<double>(x[i]) - m);
  const float lse = m + static_cast<float>(std::log(total));
  out->logprob = x[token] - lse;
  if (p.top_logprobs <= 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const int k = std::min<int>(p.top_logprobs, static_cast<int>(vocab));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) { return Better(x, a, b); });
  for (int i = 0; i < k; ++i) out->top_logprobs.push_back({ids[i], x[ids[i]] - lse});
}

// Candidate ids (ascending) after top-k, min-p and top-p, with weights e = exp(z - max z).
void Nucleus(const SamplingParams& p, const float* z, int64_t vocab, std::vector<int32_t>* ids, std::vector<float>* e) {
  ids->clear();
  for (int32_t i = 0; i < vocab; ++i)
    if (z[i] != kNegInf) ids->push_back(i);
  if (p.top_k > 0 && static_cast<int64_t>(ids->size()) > p.top_k) {
    std::nth_element(ids->begin(), ids->begin() + p.top_k, ids->end(), [&](int32_t a, int32_t b) { return Better(z, a, b); });
    ids->resize(static_cast<size_t>(p.top_k));
    std::sort(ids->begin(), ids->end());
  }
  float m = kNegInf;
  for (int32_t i : *ids) m = std::max(m, z[i]);
  std::vector<float> w(static_cast<size_t>(vocab), 0.0f);
  for (int32_t i : *ids) w[i] = std::exp(z[i] - m);
  if (p.min_p > 0.0f) {
    std::erase_if(*ids, [&](int32_t i) { return w[i] < p.min_p; });  // max weight is 1
  }
  if (p.top_p < 1.0f) {
    double total = 0.0;
    for (int32_t i : *ids) total += w[i];
    std::vector<int32_t> order = *ids;
    auto by_weight = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
    size_t sorted = 0, keep = order.size();
    double cum = 0.0;
    for (size_t window = 256; sorted < order.size(); window *= 8) {
      size_t end = std::min(order.size(), window);
      std::partial_sort(order.begin() + sorted, order.begin() + end, order.end(), by_weight);
      for (; sorted < end; ++sorted) {
        cum += w[order[sorted]];
        if (cum >= p.top_p * total) {
          keep = sorted + 1;
          sorted = order.size();
          break;
        }
      }
    }
    order.resize(keep);
    std::sort(order.begin(), order.end());
    *ids = std::move(order);
  }
  e->clear();
  for (int32_t i : *ids) e->push_back(w[i]);
}

}  // namespace

void TokenHistory::SetPrompt(std::span<const int32_t> prompt) {
  prompt_tokens_sorted.assign(prompt.begin(), prompt.end());
  std::sort(prompt_tokens_sorted.begin(), prompt_tokens_sorted.end());
  prompt_tokens_sorted.erase(std::unique(prompt_tokens_sorted.begin(), prompt_tokens_sorted.end()),
                             prompt_tokens_sorted.end());
}

base::Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab) {
  auto bad = [](const std::string& what) { return Error(ErrorCode::kInvalidArgument, what); };
  if (!(p.temperature >= 0.0f && p.temperature <= 2.0f)) return bad("temperature must be in [0, 2]");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p must be in (0, 1]");
  if (p.top_k < 0) return bad("top_k must be >= 0");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p must be in [0, 1]");
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) return bad("presence_penalty must be in [-2, 2]");
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) return bad("frequency_penalty must be in [-2, 2]");
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 2.0f)) return bad("repetition_penalty must be in (0, 2]");
  if (p.top_logprobs < 0 || p.top_logprobs > 20) return bad("top_logprobs must be in [0, 20]");
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab) return bad("logit_bias token id " + std::to_string(id) + " is outside the vocabulary");
    if (!(bias >= -100.0f && bias <= 100.0f)) return bad("logit_bias values must be in [-100, 100]");
  }
  return base::Status::Ok();
}

SampleResult Sample(std::span<const float> logits, const SamplingParams& p, const TokenHistory& h, int64_t position,
                    std::span<const uint32_t> allowed, std::vector<float>* scratch) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const float* x = logits.data();
  if (Adjusts(p, allowed)) {  // on a copy; plain rows read the logits where they are
    scratch->assign(logits.begin(), logits.end());
    ApplyAdjustments(p, h, allowed, scratch->data(), vocab);
    x = scratch->data();
  }
  SampleResult out;
  if (p.temperature == 0.0f || p.top_k == 1) {
    out.token = Argmax(x, vocab);
  } else {
    std::vector<float> z(x, x + vocab);
    for (auto& v : z) v /= p.temperature;
    std::vector<int32_t> ids;
    std::vector<float> e;
    Nucleus(p, z.data(), vocab, &ids, &e);
    if (ids.empty()) ids.push_back(Argmax(x, vocab)), e.push_back(1.0f);  // everything masked
    // Inverse CDF in token-id order with one uniform for (seed, position).
    double total = 0.0;
    for (float w : e) total += w;
    const double target = UniformAt(p.seed, position, 0) * total;
    double cum = 0.0;
    out.token = ids.back();
    for (size_t j = 0; j < ids.size(); ++j) {
      cum += e[j];
      if (cum >= target) {
        out.token = ids[j];
        break;
      }
    }
  }
  if (p.logprobs || p.top_logprobs > 0) FillLogprobs(p, x, vocab, out.token, &out);
  return out;
}

std::vector<SampleResult> SampleBatch(std::span<const SampleRow> rows, std::vector<float>* scratch) {
  std::vector<SampleResult> out;
  out.reserve(rows.size());
  for (const SampleRow& row : rows) {
    out.push_back(Sample(row.logits, *row.params, *row.history, row.position, row.allowed, scratch));
  }
  return out;
}

}  // namespace flashserve::sampler
