// Test-only: tiny-v41 with its Engram layer and a small vision tower (and tiny V4 with one, as
// Vision-Exp), and prompts of text, one picture's span (the tower's rows for random patches) and
// more text, run through the engine with the span embeddings in chunks of given sizes.
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

// Random patch values in [-1, 1) for a vit_h x vit_w grid of the model's patches.
inline std::vector<float> RandomPatches(const Model& model, int vit_h, int vit_w, uint32_t seed) {
  const int p = model.config().vision.patch_size;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> level(-1.0f, 1.0f);
  std::vector<float> patches(static_cast<size_t>(vit_h * vit_w * 3 * p * p));
  for (float& v : patches) v = level(rng);
  return patches;
}

// tiny-v41 with its Engram layer, the small tower and a raw window of `window` tokens.
inline std::unique_ptr<Model> LoadV41Vision(int window, const std::string& tag) {
  model::ModelConfig c = TinyV41EngramConfig();
  c.image_token_id = kImageToken;
  c.sliding_window = window;
  return WithSyntheticEngramMap(WriteAndLoad(c, false, tag));
}

inline const Model& VisionModel() {
  static std::unique_ptr<Model> m;
  if (!m) m = LoadV41Vision(128, "_v41_vision");
  return *m;
}

// tiny (V4) with the small tower, as a DeepSeek-V4-Flash-Vision-Exp checkpoint has it (bias_vl on
// every layer, the image_pad vector), and a 16-token raw window so that pictures outgrow it.
inline const Model& VisionExpModel() {
  static std::unique_ptr<Model> m;
  if (!m) {
    model::ModelConfig c = model::TinyPreset();
    c.vision = model::TinyVisionTower();
    c.image_token_id = kImageToken;
    c.sliding_window = 16;
    m = WriteAndLoad(c, false, "_v4_vision_exp");
  }
  return *m;
}

// tiny-v41's vision model with a 16-token raw window (pictures outgrow it).
inline const Model& NarrowWindowVisionModel() {
  static std::unique_ptr<Model> m;
  if (!m) m = LoadV41Vision(16, "_v41_vision_w16");
  return *m;
}

// A prompt of text, one picture's span (random patches on a vit_h x vit_w patch grid; 7 x 11
// gives a 3 x 4 aligner grid with edge padding), then more text; `embeddings` rows for every
// span position. With `bidirectional`, `spans` holds the picture's START..END positions.
struct ImagePrompt {
  std::vector<int32_t> tokens;
  std::vector<int32_t> embedded_rows;
  std::vector<float> embeddings;
  std::vector<TokenRange> spans;  // absolute positions
};

struct PictureShape {
  vision::SpanLayout layout = vision::SpanLayout::kV41;
  bool bidirectional = false;
  int vit_h = 7, vit_w = 11;
  int text_before = 40;
};

inline ImagePrompt MakePrompt(const Model& model, uint32_t picture_seed, const PictureShape& shape = {}) {
  base::ThreadPool pool(2);
  VisionTower tower(model, pool);
  const int ratio = model.config().vision.downsample_ratio;
  const std::vector<float> patches = RandomPatches(model, shape.vit_h, shape.vit_w, picture_seed);
  auto rows = tower.Encode(patches, shape.vit_h, shape.vit_w);
  FS_CHECK(rows.ok(), "%s", rows.error().ToString().c_str());
  vision::ImagePlan plan;
  plan.llm_h = (shape.vit_h + ratio - 1) / ratio;
  plan.llm_w = (shape.vit_w + ratio - 1) / ratio;
  const vision::ImageSpan span = vision::BuildSpan(plan, shape.layout, shape.text_before);
  std::vector<uint8_t> roles;
  for (vision::SpanRole r : span.roles) roles.push_back(static_cast<uint8_t>(r));
  auto embeddings = tower.SpanEmbeddings(roles, span.image_rows, *rows);
  FS_CHECK(embeddings.ok(), "%s", embeddings.error().ToString().c_str());
  ImagePrompt out;
  for (int32_t t : RandomTokens(shape.text_before, 11)) out.tokens.push_back(t == kImageToken ? 5 : t);
  TokenRange bidirectional{-1, -1};
  for (size_t i = 0; i < roles.size(); ++i) {
    const auto role = static_cast<vision::SpanRole>(roles[i]);
    if (role == vision::SpanRole::kStart) bidirectional.begin = static_cast<int32_t>(out.tokens.size());
    if (role == vision::SpanRole::kEnd) bidirectional.end = static_cast<int32_t>(out.tokens.size()) + 1;
    out.embedded_rows.push_back(static_cast<int32_t>(out.tokens.size()));
    out.tokens.push_back(kImageToken);
  }
  if (shape.bidirectional) out.spans.push_back(bidirectional);
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
    std::vector<TokenRange> spans;
    for (const TokenRange& span : prompt.spans) {
      if (span.end <= static_cast<int32_t>(done) || span.begin >= static_cast<int32_t>(done + n)) continue;
      FS_CHECK(span.begin >= static_cast<int32_t>(done) && span.end <= static_cast<int32_t>(done + n),
               "a chunk cuts the picture's span");
      spans.push_back({span.begin - static_cast<int32_t>(done), span.end - static_cast<int32_t>(done)});
    }
    ForwardRequest req{state.get(), std::span<const int32_t>(prompt.tokens.data() + done, n), LogitsMode::kAll};
    req.embedded_rows = rows;
    req.bidirectional = spans;
    req.embeddings = std::span<const float>(prompt.embeddings.data() + first * d, (next - first) * d);
    auto r = engine.Forward({&req, 1});
    FS_CHECK(r.ok(), "%s", r.error().ToString().c_str());
    all.insert(all.end(), r->logits.begin(), r->logits.end());
    done += n;
  }
  return all;
}

}  // namespace flashserve::engine::testing
