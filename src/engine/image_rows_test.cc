// Images through the V4.1 engine: the tower's span embeddings replace the placeholders' token
// embeddings, and the logits then still do not depend on chunking (chunks cut through the span);
// the same picture gives the same logits, another picture other logits; a placeholder without
// its embedding is refused with the state untouched; image tokens route with bias_vl (on hash
// layers too) and look like the pad to Engram. On Vision-Exp (V4) a picture's START..END span is
// bidirectional: later span rows change earlier ones, chunks around the span and batching leave
// the logits as they are, and a call that cuts the span is refused.
#include <gtest/gtest.h>

#include <random>

#include "engine/moe.h"
#include "engine/test_image_prompt.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;
using testing::ImagePrompt;
using testing::kImageToken;
using testing::MakePrompt;
using testing::RunPrompt;
using testing::VisionModel;

TEST(VisionEngine, ChunkingThroughTheSpanNeverChangesLogits) {
  Engine engine(VisionModel(), EngineOptions{});
  const ImagePrompt prompt = MakePrompt(VisionModel(), 1);
  const std::vector<float> one_shot = RunPrompt(engine, prompt, {1000});
  for (const auto& chunks : std::vector<std::vector<int>>{{1}, {5, 7}, {45}, {41, 3}}) {
    EXPECT_TRUE(BitEqual(one_shot, RunPrompt(engine, prompt, chunks))) << "first chunk " << chunks[0];
  }
}

TEST(VisionEngine, PicturesDecideTheLogits) {
  Engine engine(VisionModel(), EngineOptions{});
  const int64_t v = VisionModel().config().vocab_size;
  const ImagePrompt cat = MakePrompt(VisionModel(), 1), dog = MakePrompt(VisionModel(), 2);
  const std::vector<float> a = RunPrompt(engine, cat, {1000}), b = RunPrompt(engine, dog, {1000});
  // Text before the picture: identical; from the picture on: different.
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 40 * v, b.begin()));
  EXPECT_FALSE(std::equal(a.end() - v, a.end(), b.end() - v));
  EXPECT_TRUE(BitEqual(a, RunPrompt(engine, MakePrompt(VisionModel(), 1), {1000})));
}

TEST(VisionEngine, PlaceholderWithoutItsPictureIsRefused) {
  Engine engine(VisionModel(), EngineOptions{});
  const ImagePrompt prompt = MakePrompt(VisionModel(), 1);
  auto state = engine.NewSequence();
  ForwardRequest req{state.get(), prompt.tokens, LogitsMode::kLast};
  auto r = engine.Forward({&req, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("without its picture"), std::string::npos);
  EXPECT_EQ(state->position(), 0);
  req.embedded_rows = prompt.embedded_rows;
  req.embeddings = std::span<const float>(prompt.embeddings.data(), prompt.embeddings.size() - 1);
  EXPECT_FALSE(engine.Forward({&req, 1}).ok());
  EXPECT_EQ(state->position(), 0);
}

TEST(VisionEngine, ImageTokensRouteWithBiasVlAndHashAsPad) {
  const Model& m = VisionModel();
  EXPECT_EQ(m.EngramClass(kImageToken), m.engram_pad_class());
  EXPECT_NE(m.EngramClass(kImageToken - 1), m.engram_pad_class());
  const model::ModelConfig& c = m.config();
  model::MoeWeights w;
  w.gate_bias.assign(static_cast<size_t>(c.num_routed_experts), 0.0f);
  w.gate_bias_vl.assign(w.gate_bias.size(), 0.0f);
  for (int e = 0; e < c.num_experts_per_token; ++e) {
    w.gate_bias[static_cast<size_t>(e)] = 100.0f;                                  // text: the first k
    w.gate_bias_vl[static_cast<size_t>(c.num_routed_experts - 1 - e)] = 100.0f;    // images: the last k
  }
  std::vector<float> logits(static_cast<size_t>(c.num_routed_experts), 0.0f);
  std::vector<int32_t> text(static_cast<size_t>(c.num_experts_per_token)), image(text.size());
  std::vector<float> weights(text.size());
  RouteRow(c, w, false, 7, logits.data(), text.data(), weights.data());
  RouteRow(c, w, false, kImageToken, logits.data(), image.data(), weights.data());
  for (int32_t e : text) EXPECT_LT(e, c.num_experts_per_token);
  for (int32_t e : image) EXPECT_GE(e, c.num_routed_experts - c.num_experts_per_token);
}

// Vision-Exp (V4): on hash layers an image position skips tid2eid and takes the top-k of its
// scores plus bias_vl, weighted by the unbiased scores; text keeps its table row, and a
// checkpoint without bias_vl (text-only V4) hashes every id.
TEST(VisionEngine, ImageTokensSkipTheHashTableWithBiasVl) {
  model::ModelConfig c = model::TinyPreset();
  c.vocab_size = 1280;
  c.image_token_id = kImageToken;
  const int k = c.num_experts_per_token, experts = c.num_routed_experts;
  model::MoeWeights w;
  w.tid2eid.resize(static_cast<size_t>(c.vocab_size * k));
  for (size_t i = 0; i < w.tid2eid.size(); ++i) w.tid2eid[i] = static_cast<int32_t>(i % k);  // experts 0..k-1
  w.gate_bias_vl.assign(static_cast<size_t>(experts), 0.0f);
  for (int e = 0; e < k; ++e) w.gate_bias_vl[static_cast<size_t>(experts - 1 - e)] = 100.0f;  // the last k
  std::vector<float> logits(static_cast<size_t>(experts));
  for (int e = 0; e < experts; ++e) logits[static_cast<size_t>(e)] = 0.1f * static_cast<float>(e % 5);
  std::vector<int32_t> text(static_cast<size_t>(k)), image(text.size()), plain(text.size());
  std::vector<float> text_w(text.size()), image_w(text.size()), plain_w(text.size());
  RouteRow(c, w, true, 7, logits.data(), text.data(), text_w.data());
  RouteRow(c, w, true, kImageToken, logits.data(), image.data(), image_w.data());
  for (int i = 0; i < k; ++i) EXPECT_EQ(text[static_cast<size_t>(i)], i);
  float total = 0.0f;
  for (size_t i = 0; i < image.size(); ++i) {
    EXPECT_GE(image[i], experts - k);
    total += image_w[i];
  }
  EXPECT_NEAR(total, c.routed_scaling_factor, 1e-5);  // unbiased scores, renormalised, scaled
  EXPECT_NE(image_w.front(), image_w.back());        // by the scores, not by the bias
  w.gate_bias_vl.clear();
  RouteRow(c, w, true, kImageToken, logits.data(), plain.data(), plain_w.data());
  for (int i = 0; i < k; ++i) EXPECT_EQ(plain[static_cast<size_t>(i)], i);
}

testing::PictureShape VisionExpShape() {
  testing::PictureShape shape;
  shape.layout = vision::SpanLayout::kVisionExp;
  shape.bidirectional = true;
  shape.vit_h = 14;
  shape.vit_w = 23;  // 5 x 8 aligner grid, longer than the model's 16-token window
  shape.text_before = 41;
  return shape;
}

TEST(VisionExpEngine, ChunksAroundTheSpanAndBatchingKeepTheLogits) {
  const Model& m = testing::VisionExpModel();
  Engine engine(m, EngineOptions{});
  const ImagePrompt prompt = MakePrompt(m, 1, VisionExpShape());
  ASSERT_EQ(prompt.spans.size(), 1u);
  const int32_t begin = prompt.spans[0].begin, len = prompt.spans[0].end - begin;
  EXPECT_EQ(begin % 4, 3);  // lead pads put START at 3 mod 4 (41 + 2 pads)
  EXPECT_GT(len, m.config().sliding_window);
  const std::vector<float> one_shot = RunPrompt(engine, prompt, {1000});
  EXPECT_TRUE(BitEqual(one_shot, RunPrompt(engine, prompt, {begin, len, 1})));
  EXPECT_TRUE(BitEqual(one_shot, RunPrompt(engine, prompt, {7, begin - 7 + len + 5, 3})));
  // Batched beside a text-only sequence, each row's logits are its own.
  auto state = engine.NewSequence(), other = engine.NewSequence();
  const std::vector<int32_t> text = testing::RandomTokens(60, 5);
  const std::vector<float> alone = testing::RunChunked(engine, other.get(), text, {60});
  other = engine.NewSequence();
  ForwardRequest reqs[2] = {{state.get(), prompt.tokens, LogitsMode::kAll}, {other.get(), text, LogitsMode::kAll}};
  reqs[0].embedded_rows = prompt.embedded_rows;
  reqs[0].embeddings = prompt.embeddings;
  reqs[0].bidirectional = prompt.spans;
  auto r = engine.Forward(reqs);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const int64_t v = m.config().vocab_size;
  EXPECT_TRUE(std::equal(one_shot.begin(), one_shot.end(), r->logits.begin()));
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), r->logits.begin() + static_cast<int64_t>(prompt.tokens.size()) * v));
}

TEST(VisionExpEngine, LaterSpanRowsReachEarlierOnesOnlyInsideTheSpan) {
  const Model& m = testing::VisionExpModel();
  Engine engine(m, EngineOptions{});
  const int64_t v = m.config().vocab_size, d = m.config().hidden_size;
  ImagePrompt a = MakePrompt(m, 1, VisionExpShape());
  ImagePrompt b = a;
  const int32_t start = a.spans[0].begin, end = a.spans[0].end;
  // Another last picture row (the END delimiter's is fixed; change the row before it).
  const size_t changed = a.embedded_rows.size() - 2;
  ASSERT_EQ(a.embedded_rows[changed], end - 2);
  for (int64_t k = 0; k < d; ++k) b.embeddings[changed * d + k] += 0.5f;
  const std::vector<float> la = RunPrompt(engine, a, {1000}), lb = RunPrompt(engine, b, {1000});
  // Before START (text and the lead pads): identical. START itself: already different.
  EXPECT_TRUE(std::equal(la.begin(), la.begin() + start * v, lb.begin()));
  EXPECT_FALSE(std::equal(la.begin() + start * v, la.begin() + (start + 1) * v, lb.begin() + start * v));
  // Causal (no bidirectional span): START does not see the change.
  a.spans.clear();
  b.spans.clear();
  const std::vector<float> ca = RunPrompt(engine, a, {1000}), cb = RunPrompt(engine, b, {1000});
  EXPECT_TRUE(std::equal(ca.begin(), ca.begin() + (end - 2) * v, cb.begin()));
  EXPECT_FALSE(BitEqual(la, ca));
}

TEST(VisionExpEngine, ACallThatCutsTheSpanIsRefused) {
  const Model& m = testing::VisionExpModel();
  Engine engine(m, EngineOptions{});
  const ImagePrompt prompt = MakePrompt(m, 1, VisionExpShape());
  auto state = engine.NewSequence();
  const int32_t cut = prompt.spans[0].begin + 5;
  ForwardRequest req{state.get(), std::span<const int32_t>(prompt.tokens.data(), cut), LogitsMode::kLast};
  std::vector<int32_t> rows;
  for (int32_t r : prompt.embedded_rows)
    if (r < cut) rows.push_back(r);
  req.embedded_rows = rows;
  req.embeddings = std::span<const float>(prompt.embeddings.data(), rows.size() * m.config().hidden_size);
  const TokenRange past_the_end{prompt.spans[0].begin, prompt.spans[0].end};
  req.bidirectional = {&past_the_end, 1};
  auto r = engine.Forward({&req, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("computed whole, in one call"), std::string::npos) << r.error().message();
  EXPECT_EQ(state->position(), 0);
  const TokenRange backwards[2] = {{50, 52}, {45, 47}};
  req.bidirectional = backwards;
  EXPECT_FALSE(engine.Forward({&req, 1}).ok());
}

}  // namespace
}  // namespace flashserve::engine
