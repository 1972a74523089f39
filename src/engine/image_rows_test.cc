// Images through the V4.1 engine: the tower's span embeddings replace the placeholders' token
// embeddings, and the logits then still do not depend on chunking (chunks cut through the span);
// the same picture gives the same logits, another picture other logits; a placeholder without
// its embedding is refused with the state untouched; image tokens route with bias_vl and look
// like the pad to Engram.
#include <gtest/gtest.h>

#include <random>

#include "engine/moe.h"
#include "engine/test_model.h"
#include "engine/vision_tower.h"
#include "vision/plan.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;

constexpr int32_t kImageToken = 1264;

const Model& VisionModel() {
  static std::unique_ptr<Model> m;
  if (!m) {
    model::ModelConfig c = testing::TinyV41EngramConfig();
    c.image_token_id = kImageToken;
    m = testing::WriteAndLoad(c, false, "_v41_vision");
    std::vector<int32_t> map(1280);
    for (size_t i = 0; i < map.size(); ++i) map[i] = static_cast<int32_t>(i % 1000);
    base::Status s = m->SetEngramTokenMap(std::move(map), 1000);
    FS_CHECK(s.ok(), "%s", s.ToString().c_str());
  }
  return *m;
}

// A prompt of text, one picture's span (random patches on a 7 x 11 patch grid: a 3 x 4 aligner
// grid with edge padding), then more text; `embeddings` rows for every span position.
struct ImagePrompt {
  std::vector<int32_t> tokens;
  std::vector<int32_t> embedded_rows;
  std::vector<float> embeddings;
};

ImagePrompt MakePrompt(const Model& model, uint32_t picture_seed) {
  base::ThreadPool pool(2);
  VisionTower tower(model, pool);
  const int p = model.config().vision.patch_size, vit_h = 7, vit_w = 11;
  std::mt19937 rng(picture_seed);
  std::uniform_real_distribution<float> level(-1.0f, 1.0f);
  std::vector<float> patches(static_cast<size_t>(vit_h * vit_w * 3 * p * p));
  for (float& v : patches) v = level(rng);
  auto rows = tower.Encode(patches, vit_h, vit_w);
  FS_CHECK(rows.ok(), "%s", rows.error().ToString().c_str());
  vision::ImagePlan plan;
  plan.llm_h = 3;
  plan.llm_w = 4;
  const vision::ImageSpan span = vision::BuildSpan(plan, vision::SpanLayout::kV41, 0);
  std::vector<uint8_t> roles;
  for (vision::SpanRole r : span.roles) roles.push_back(static_cast<uint8_t>(r));
  auto embeddings = tower.SpanEmbeddings(roles, span.image_rows, *rows);
  FS_CHECK(embeddings.ok(), "%s", embeddings.error().ToString().c_str());
  ImagePrompt out;
  for (int32_t t : testing::RandomTokens(40, 11)) out.tokens.push_back(t == kImageToken ? 5 : t);
  for (size_t i = 0; i < roles.size(); ++i) {
    out.embedded_rows.push_back(static_cast<int32_t>(out.tokens.size()));
    out.tokens.push_back(kImageToken);
  }
  out.embeddings = std::move(embeddings).value();
  for (int32_t t : testing::RandomTokens(30, 12)) out.tokens.push_back(t == kImageToken ? 5 : t);
  return out;
}

std::vector<float> RunPrompt(Engine& engine, const ImagePrompt& prompt, const std::vector<int>& chunks) {
  auto state = engine.NewSequence();
  const int64_t d = engine.model().config().hidden_size;
  std::vector<float> all;
  size_t done = 0, c = 0, next = 0;
  while (done < prompt.tokens.size()) {
    const size_t n = std::min<size_t>(static_cast<size_t>(chunks[c++ % chunks.size()]), prompt.tokens.size() - done);
    std::vector<int32_t> rows;
    const size_t first = next;
    while (next < prompt.embedded_rows.size() && static_cast<size_t>(prompt.embedded_rows[next]) < done + n) {
      rows.push_back(prompt.embedded_rows[next++] - static_cast<int32_t>(done));
    }
    ForwardRequest req{state.get(), std::span<const int32_t>(prompt.tokens.data() + done, n), LogitsMode::kAll};
    req.embedded_rows = rows;
    req.embeddings = std::span<const float>(prompt.embeddings.data() + first * d, (next - first) * d);
    auto r = engine.Forward({&req, 1});
    FS_CHECK(r.ok(), "%s", r.error().ToString().c_str());
    all.insert(all.end(), r->logits.begin(), r->logits.end());
    done += n;
  }
  return all;
}

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

}  // namespace
}  // namespace flashserve::engine
