#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "sampler/philox.h"

namespace flashserve::sampler {
namespace {

std::vector<float> Logits(std::vector<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

SampleResult Draw(const std::vector<float>& logits, const SamplingParams& p, int64_t pos,
                  const TokenHistory& h = TokenHistory{}) {
  std::vector<float> scratch;
  return Sample(logits, p, h, pos, {}, &scratch);
}

TEST(PhiloxTest, KnownAnswerAndUniformRange) {
  // Random123 known-answer test for philox4x32-10 with zero counter and key.
  auto out = Philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
  double sum = 0;
  const int n = 100000;  // mean of n uniforms: sigma = 0.289 / sqrt(n) ~ 0.0009
  for (int i = 0; i < n; ++i) {
    float u = UniformAt(7, i, 0);
    ASSERT_GT(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.0046);
}

TEST(SamplerTest, GreedyPicksArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(Draw({1, 3, 2, 3}, p, 0).token, 1);
  p.temperature = 1;
  p.top_k = 1;
  EXPECT_EQ(Draw({1, 3, 2, 3}, p, 5).token, 1);
}

// Greedy over a real vocabulary: the lowest id of the maximum, on the logits as they are and on
// the adjusted copy (a bias of zero takes that path) alike; logprobs the same either way.
TEST(SamplerTest, GreedyOnAFullVocabularyMatchesTheNaiveArgmax) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.0f, 4.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> logits(129280);
    for (float& v : logits) v = std::round(d(rng) * 8) / 8;  // coarse values: ties happen
    int32_t naive = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(logits.size()); ++i)
      if (logits[i] > logits[naive]) naive = i;
    SamplingParams plain;
    plain.temperature = 0;
    plain.logprobs = true;
    SamplingParams adjusted = plain;
    adjusted.logit_bias = {{7, 0.0f}};
    const SampleResult a = Draw(logits, plain, trial), b = Draw(logits, adjusted, trial);
    EXPECT_EQ(a.token, naive);
    EXPECT_EQ(b.token, naive);
    EXPECT_EQ(a.logprob, b.logprob);
  }
}

TEST(SamplerTest, SameSeedAndPositionGiveTheSameToken) {
  std::vector<float> logits = Logits({0.2, 0.2, 0.2, 0.2, 0.2});
  SamplingParams p;
  p.seed = 1234;
  std::set<int32_t> seen;
  for (int64_t pos = 0; pos < 64; ++pos) {
    int32_t a = Draw(logits, p, pos).token;
    EXPECT_EQ(a, Draw(logits, p, pos).token);
    seen.insert(a);
  }
  EXPECT_EQ(seen.size(), 5u);  // different positions draw differently
  SamplingParams q = p;
  q.seed = 99;
  int differ = 0;
  for (int64_t pos = 0; pos < 64; ++pos) differ += Draw(logits, p, pos).token != Draw(logits, q, pos).token;
  EXPECT_GT(differ, 20);
}

TEST(SamplerTest, FrequenciesFollowTheSoftmax) {
  std::vector<double> probs = {0.5, 0.25, 0.125, 0.125};
  std::vector<float> logits = Logits(probs);
  SamplingParams p;
  p.seed = 42;
  std::vector<int> counts(4);
  const int n = 20000;
  for (int64_t pos = 0; pos < n; ++pos) ++counts[Draw(logits, p, pos).token];
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[i] / double(n), probs[i], 0.015) << i;
  // Temperature 0.5 squares the odds: 16:4:1:1.
  p.temperature = 0.5f;
  counts.assign(4, 0);
  for (int64_t pos = 0; pos < n; ++pos) ++counts[Draw(logits, p, pos).token];
  EXPECT_NEAR(counts[0] / double(n), 16.0 / 22, 0.015);
}

// Speculative verification keeps a one-hot draft x exactly when the sampled token equals it
// (serve/speculation.cc). Over 100k seeds on an 8-token vocabulary: the emitted token follows
// the target softmax (chi-square, 7 degrees of freedom, p > 0.01), the draft is accepted with
// probability p(x), the lossless rule min(1, p(x) / q(x)) for q one-hot, for a good drafter (the
// argmax) and a deliberately bad one (the least likely token), and emitted pairs under a toy
// two-position model follow p(t0) p(t1 | t0) whatever was drafted (chi-square, 63 dof).
TEST(SamplerTest, SpeculativeAcceptanceIsLossless) {
  const std::vector<double> probs = {0.30, 0.20, 0.15, 0.12, 0.10, 0.07, 0.04, 0.02};
  const std::vector<float> logits = Logits(probs);
  const int n = 100000;
  for (int32_t draft : {0, 7}) {
    std::vector<int> counts(8);
    int accepted = 0;
    for (int seed = 0; seed < n; ++seed) {
      SamplingParams p;
      p.seed = static_cast<uint64_t>(seed);
      const int32_t token = Draw(logits, p, 1000).token;
      ++counts[token];
      accepted += token == draft;
    }
    double chi2 = 0;
    for (int i = 0; i < 8; ++i) chi2 += std::pow(counts[i] - n * probs[i], 2) / (n * probs[i]);
    EXPECT_LT(chi2, 18.48) << "draft " << draft;  // the 0.99 quantile of chi-square with 7 dof
    const double rate = static_cast<double>(accepted) / n, sd = std::sqrt(probs[draft] * (1 - probs[draft]) / n);
    EXPECT_NEAR(rate, probs[draft], 4 * sd) << "draft " << draft;
  }
  // Two positions: row 1's distribution depends on the token before it (a shifted softmax).
  auto second = [&](int32_t prev) {
    std::vector<double> q(8);
    for (int i = 0; i < 8; ++i) q[static_cast<size_t>(i)] = probs[static_cast<size_t>((i + prev) % 8)];
    return q;
  };
  for (int32_t draft : {0, 7}) {
    std::vector<int> pairs(64);
    for (int seed = 0; seed < n; ++seed) {
      SamplingParams p;
      p.seed = static_cast<uint64_t>(seed);
      const int32_t t0 = Draw(logits, p, 2000).token;
      // Verify: row 1 was computed after the draft; it is used only when the draft was kept,
      // else the next step computes it after t0 (the same function of t0 here).
      const int32_t after = t0 == draft ? draft : t0;
      const int32_t t1 = Draw(Logits(second(after)), p, 2001).token;
      ++pairs[static_cast<size_t>(t0 * 8 + t1)];
    }
    double chi2 = 0;
    for (int a = 0; a < 8; ++a)
      for (int b = 0; b < 8; ++b) {
        const double expected = n * probs[static_cast<size_t>(a)] * second(a)[static_cast<size_t>(b)];
        chi2 += std::pow(pairs[static_cast<size_t>(a * 8 + b)] - expected, 2) / expected;
      }
    EXPECT_LT(chi2, 92.0) << "draft " << draft;  // the 0.99 quantile of chi-square with 63 dof
  }
}

TEST(SamplerTest, TopKTopPAndMinPRestrictTheSupport) {
  std::vector<float> logits = Logits({0.5, 0.3, 0.15, 0.05});
  auto support = [&](SamplingParams p) {
    std::set<int32_t> s;
    for (int64_t pos = 0; pos < 2000; ++pos) s.insert(Draw(logits, p, pos).token);
    return s;
  };
  SamplingParams p;
  p.top_k = 2;
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1}));
  p = SamplingParams{};
  p.top_p = 0.79f;
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1}));
  p.top_p = 0.5f;
  EXPECT_EQ(support(p), (std::set<int32_t>{0}));
  p.top_p = 0.81f;
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1, 2}));
  p = SamplingParams{};
  p.min_p = 0.35f;  // keeps p >= 0.175
  EXPECT_EQ(support(p), (std::set<int32_t>{0, 1}));
}

TEST(SamplerTest, PenaltiesBiasAndMask) {
  SamplingParams p;
  p.temperature = 0;
  TokenHistory h;
  h.AddOutput(0);
  h.AddOutput(0);
  std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  EXPECT_EQ(Draw(logits, p, 0, h).token, 0);
  p.frequency_penalty = 0.3f;  // 2.0 - 0.6 = 1.4 < 1.5
  EXPECT_EQ(Draw(logits, p, 0, h).token, 1);
  p.frequency_penalty = 0;
  p.presence_penalty = 0.6f;
  EXPECT_EQ(Draw(logits, p, 0, h).token, 1);
  p.presence_penalty = 0;
  p.repetition_penalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(Draw(logits, p, 0, h).token, 1);
  TokenHistory prompt_only;
  int32_t prompt[] = {1};
  prompt_only.SetPrompt(prompt);
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(Draw({1.0f, 1.5f, 0.0f}, p, 0, prompt_only).token, 0);  // 1.5 / 2 = 0.75
  p = SamplingParams{};
  p.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(Draw(logits, p, 3).token, 2);
  p.logit_bias = {{0, -100.0f}, {1, -100.0f}};
  EXPECT_EQ(Draw(logits, p, 3).token, 2);
  std::vector<uint32_t> mask = {0b100};
  std::vector<float> scratch;
  EXPECT_EQ(Sample(logits, SamplingParams{}, TokenHistory{}, 0, mask, &scratch).token, 2);
}

TEST(SamplerTest, LogprobsAreNormalisedAndSorted) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, -1.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 3;
  SampleResult r = Draw(logits, p, 0);
  EXPECT_EQ(r.token, 2);
  double total = std::exp(0.0 - 2) + std::exp(1.0 - 2) + 1 + std::exp(-1.0 - 2);
  EXPECT_NEAR(r.logprob, -std::log(total), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token, 2);
  EXPECT_EQ(r.top_logprobs[1].token, 1);
  EXPECT_EQ(r.top_logprobs[2].token, 0);
  EXPECT_NEAR(r.top_logprobs[1].logprob, r.logprob - 1.0f, 1e-5);
}

// A batch of rows (two sharing logits with different seeds, one masked, one with a history)
// gives each row what it gives alone, in any order.
TEST(SamplerTest, BatchRowsAreIndependentOfTheBatch) {
  std::vector<float> a = Logits({0.1, 0.2, 0.3, 0.4}), b = Logits({0.4, 0.3, 0.2, 0.1});
  SamplingParams p1, p2, greedy;
  p1.seed = 1;
  p2.seed = 2;
  greedy.temperature = 0;
  TokenHistory none, seen;
  seen.AddOutput(3);
  SamplingParams penalised = greedy;
  penalised.presence_penalty = 2.0f;
  const std::vector<uint32_t> only_token_2 = {1u << 2};
  std::vector<SampleRow> rows = {{a, &p1, &none, 5, {}}, {a, &p2, &none, 5, {}}, {b, &greedy, &none, 9, only_token_2},
                                 {a, &penalised, &seen, 7, {}}};
  std::vector<float> scratch;
  const std::vector<SampleResult> batch = SampleBatch(rows, &scratch);
  ASSERT_EQ(batch.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleRow& r = rows[i];
    EXPECT_EQ(batch[i].token, Sample(r.logits, *r.params, *r.history, r.position, r.allowed, &scratch).token) << i;
  }
  EXPECT_EQ(batch[2].token, 2);  // the mask decides
  EXPECT_EQ(batch[3].token, 2);  // greedy would pick 3; the penalty moves it
  std::vector<SampleRow> reversed(rows.rbegin(), rows.rend());
  const std::vector<SampleResult> back = SampleBatch(reversed, &scratch);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(back[rows.size() - 1 - i].token, batch[i].token);
  EXPECT_TRUE(SampleBatch({}, &scratch).empty());
}

TEST(SamplerTest, ValidationNamesTheBadField) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p, 10).ok());
  p.temperature = 3;
  EXPECT_NE(ValidateSamplingParams(p, 10).error().message().find("temperature"), std::string::npos);
  p = SamplingParams{};
  p.top_p = 0;
  EXPECT_FALSE(ValidateSamplingParams(p, 10).ok());
  p = SamplingParams{};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(ValidateSamplingParams(p, 10).error().message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{1, 101.0f}};
  EXPECT_FALSE(ValidateSamplingParams(p, 10).ok());
  p = SamplingParams{};
  p.top_logprobs = 21;
  EXPECT_FALSE(ValidateSamplingParams(p, 10).ok());
}

}  // namespace
}  // namespace flashserve::sampler
