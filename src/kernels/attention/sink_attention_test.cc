#include "kernels/attention/sink_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
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
