#include "kernels/attention/sink_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace flashserve::kernels {
namespace {

TEST(SinkAttentionTest, MatchesReference) {
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  for (int num_keys : {1, 2, 17, 144}) {
    for (int dim : {64, 512}) {
      const int heads = 5;
      std::vector<float> q(heads * dim), sinks(heads), keys(num_keys * dim);
      for (auto& v : q) v = d(rng);
      for (auto& v : sinks) v = d(rng) * 3;
      for (auto& v : keys) v = d(rng);
      std::vector<const float*> ptrs;
      for (int j = 0; j < num_keys; ++j) ptrs.push_back(keys.data() + j * dim);
      std::vector<float> ref(heads * dim), got(heads * dim), scratch(num_keys);
      float scale = 1.0f / std::sqrt(static_cast<float>(dim));
      SinkAttentionReference(q.data(), heads, dim, ptrs.data(), num_keys, sinks.data(), scale, ref.data());
      SinkAttention(q.data(), 0, heads, dim, ptrs.data(), num_keys, sinks.data(), scale, got.data(), scratch.data());
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(ref[i], got[i], 1e-5);
    }
  }
}

TEST(SinkAttentionTest, EveryIsaMatchesReferenceAndSplitsHeadsFreely) {
  std::mt19937 rng(4);
  std::normal_distribution<float> d;
  const int heads = 6, dim = 512, num_keys = 37;
  std::vector<float> q(heads * dim), sinks(heads), keys(num_keys * dim);
  for (auto& v : q) v = d(rng) * 0.2f;
  for (auto& v : sinks) v = d(rng);
  for (auto& v : keys) v = d(rng);
  std::vector<const float*> ptrs;
  for (int j = 0; j < num_keys; ++j) ptrs.push_back(keys.data() + j * dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> ref(heads * dim), scratch(num_keys);
  SinkAttentionReference(q.data(), heads, dim, ptrs.data(), num_keys, sinks.data(), scale, ref.data());
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    std::vector<float> all(heads * dim), one_by_one(heads * dim);
    SinkAttentionWithIsa(isa, q.data(), 0, heads, dim, ptrs.data(), num_keys, sinks.data(), scale, all.data(),
                         scratch.data());
    for (int h = heads - 1; h >= 0; --h)
      SinkAttentionWithIsa(isa, q.data(), h, h + 1, dim, ptrs.data(), num_keys, sinks.data(), scale,
                           one_by_one.data(), scratch.data());
    EXPECT_EQ(0, std::memcmp(all.data(), one_by_one.data(), all.size() * sizeof(float))) << IsaName(isa);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(ref[i], all[i], 1e-5) << IsaName(isa) << " at " << i;
  }
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (IsaSupported(isa)) out.push_back(isa);
  return out;
}

struct Problem {
  int heads, dim, num_keys;
  std::vector<float> q, sinks, keys;
  std::vector<const float*> ptrs;
  Problem(int h, int d, int k, std::mt19937& rng, float q_scale = 0.2f) : heads(h), dim(d), num_keys(k) {
    std::normal_distribution<float> dist;
    q.resize(static_cast<size_t>(h) * d);
    sinks.resize(h);
    keys.resize(static_cast<size_t>(std::max(k, 1)) * d);
    for (auto& v : q) v = dist(rng) * q_scale;
    for (auto& v : sinks) v = dist(rng);
    for (auto& v : keys) v = dist(rng);
    // Keys in a shuffled order, as the engine passes window and compressed entries.
    for (int j = 0; j < k; ++j) ptrs.push_back(keys.data() + static_cast<int64_t>((j * 7) % k) * d);
  }
};

// Head counts around the 4- and 8-head blocks (every remainder of AVX-512's 8), widths with
// partial vectors, key counts around the 64-key chunks and the 3-key tiles (and none: the sink
// alone gives zeros).
TEST(SinkAttentionTest, EveryIsaMatchesReferenceOnAwkwardShapes) {
  std::mt19937 rng(6);
  for (int heads : {1, 2, 3, 4, 5, 6, 7, 9, 16}) {
    for (int dim : {7, 16, 100, 512}) {
      for (int num_keys : {0, 1, 5, 63, 64, 65, 130}) {
        Problem p(heads, dim, num_keys, rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
        std::vector<float> ref(heads * dim), scratch(num_keys + 1);
        SinkAttentionReference(p.q.data(), heads, dim, p.ptrs.data(), num_keys, p.sinks.data(), scale, ref.data());
        for (Isa isa : SupportedIsas()) {
          std::vector<float> got(heads * dim, NAN);
          SinkAttentionWithIsa(isa, p.q.data(), 0, heads, dim, p.ptrs.data(), num_keys, p.sinks.data(), scale,
                               got.data(), scratch.data());
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(ref[i], got[i], 2e-6 + 2e-6 * std::fabs(ref[i]))
                << IsaName(isa) << " heads=" << heads << " dim=" << dim << " keys=" << num_keys << " at " << i;
        }
      }
    }
  }
}

// Each head's bits depend only on its own inputs: any split of the head range (the engine
// gives each task a few heads) reproduces the whole call exactly.
TEST(SinkAttentionTest, HeadRangesNeverChangeBits) {
  std::mt19937 rng(8);
  const int heads = 11, dim = 100;
  for (int num_keys : {37, 150}) {
    Problem p(heads, dim, num_keys, rng);
    std::vector<float> scratch(num_keys);
    for (Isa isa : SupportedIsas()) {
      std::vector<float> all(heads * dim), split(heads * dim), one_by_one(heads * dim);
      SinkAttentionWithIsa(isa, p.q.data(), 0, heads, dim, p.ptrs.data(), num_keys, p.sinks.data(), 0.1f,
                           all.data(), scratch.data());
      for (auto [b, e] : {std::pair{0, 3}, std::pair{3, 4}, std::pair{4, 11}})
        SinkAttentionWithIsa(isa, p.q.data(), b, e, dim, p.ptrs.data(), num_keys, p.sinks.data(), 0.1f,
                             split.data(), scratch.data());
      for (int h = heads - 1; h >= 0; --h)
        SinkAttentionWithIsa(isa, p.q.data(), h, h + 1, dim, p.ptrs.data(), num_keys, p.sinks.data(), 0.1f,
                             one_by_one.data(), scratch.data());
      EXPECT_EQ(0, std::memcmp(all.data(), split.data(), all.size() * sizeof(float))) << IsaName(isa);
      EXPECT_EQ(0, std::memcmp(all.data(), one_by_one.data(), all.size() * sizeof(float))) << IsaName(isa);
    }
  }
}

// Logits far apart (softmax numerators down to e^-87 and below, where the vector exponential
// clamps) and a dominant sink still match the reference.
TEST(SinkAttentionTest, ExtremeLogitsMatchReference) {
  std::mt19937 rng(10);
  const int heads = 4, dim = 64, num_keys = 70;
  Problem p(heads, dim, num_keys, rng, 3.0f);
  p.sinks = {40.0f, -40.0f, 0.0f, 200.0f};
  std::vector<float> ref(heads * dim), scratch(num_keys);
  SinkAttentionReference(p.q.data(), heads, dim, p.ptrs.data(), num_keys, p.sinks.data(), 1.0f, ref.data());
  for (Isa isa : SupportedIsas()) {
    std::vector<float> got(heads * dim);
    SinkAttentionWithIsa(isa, p.q.data(), 0, heads, dim, p.ptrs.data(), num_keys, p.sinks.data(), 1.0f, got.data(),
                         scratch.data());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(ref[i], got[i], 1e-5 + 1e-5 * std::fabs(ref[i])) << IsaName(isa) << " at " << i;
  }
}

TEST(SinkAttentionTest, SinkOnlyShrinksTheOutput) {
  // One key: without a sink the output equals the key; a sink logit s scales it by 1/(1+e^(s-l)).
  const int dim = 4;
  std::vector<float> q = {0, 0, 0, 0}, key = {1, 2, 3, 4}, out(dim), scratch(1);
  const float* k = key.data();
  float sink = 0.0f;  // logit of the key is 0 too -> weight 1/2
  SinkAttention(q.data(), 0, 1, dim, &k, 1, &sink, 1.0f, out.data(), scratch.data());
  for (int c = 0; c < dim; ++c) EXPECT_FLOAT_EQ(out[c], key[c] / 2);
  sink = -1000.0f;
  SinkAttention(q.data(), 0, 1, dim, &k, 1, &sink, 1.0f, out.data(), scratch.data());
  for (int c = 0; c < dim; ++c) EXPECT_FLOAT_EQ(out[c], key[c]);
}

}  // namespace
}  // namespace flashserve::kernels
