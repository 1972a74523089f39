// Test-only: tiny-v41 with its Engram layer and a small vision tower, and prompts of text, one
// picture's span (the tower's rows for random patches) and more text, run through the engine
// with the span embeddings in chunks of given sizes.
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "engine/test_model.h"
#include "engine/vision_tower.h"
#include "vision/plan.h"

namespace flashserve::engine::testing {

inline constexpr int32_t kImageToken = 1264;

inline const Model& VisionModel() {
  static std::unique_ptr<Model> m;
  if (!m) {
    model::ModelConfig c = TinyV41EngramConfig();
    c.image_token_id = kImageToken;
    m = WriteAndLoad(c, false, "_v41_vision");
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

inline ImagePrompt MakePrompt(const Model& model, uint32_t picture_seed) {
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
  for (int32_t t : RandomTokens(40, 11)) out.tokens.push_back(t == kImageToken ? 5 : t);
  for (size_t i = 0; i < roles.size(); ++i) {
    out.embedded_rows.push_back(static_cast<int32_t>(out.tokens.size()));
    out.tokens.push_back(kImageToken);
  }
  out.embeddings = std::move(embeddings).value();
  for (int32_t t : RandomTokens(30, 12)) out.tokens.push_back(t == kImageToken ? 5 : t);
  return out;
}

inline std::vector<float> RunPrompt(Engine& engine, const ImagePrompt& prompt, const std::vector<int>& chunks) {
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

}  // namespace flashserve::engine::testing
