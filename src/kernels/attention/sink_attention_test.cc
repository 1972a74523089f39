#include "kernels/attention/sink_attention.h"

#include <gtest/gtest.h>

#include <cmath>
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
