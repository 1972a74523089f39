// Pictures on a Vision-Exp model (V4 with a tower) through the engine loop: whatever the step
// budget (one far below a picture's span), the loop computes each START..END span in one chunk
// with its bidirectional window, so the answer is the engine's for the whole prompt at once; a
// repeated request resumes from the block before the span (never inside it) and answers the same.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "engine/test_image_prompt.h"
#include "engine/vision_tower.h"
#include "serve/engine_loop.h"
#include "vision/plan.h"

namespace flashserve::serve {
namespace {

using engine::testing::kImageToken;
using engine::testing::VisionExpModel;

constexpr int kVitH = 14, kVitW = 23;  // a 5 x 8 aligner grid

protocol::GenerateRequest Request(std::string id) {
  protocol::GenerateRequest r;
  r.id = std::move(id);
  for (int32_t t : engine::testing::RandomTokens(330, 21)) r.prompt.push_back(t == kImageToken ? 5 : t);
  protocol::ImageInput image;
  image.vit_h = kVitH;
  image.vit_w = kVitW;
  image.patches = engine::testing::RandomPatches(VisionExpModel(), kVitH, kVitW, 4);
  vision::ImagePlan plan;
  plan.llm_h = 5;
  plan.llm_w = 8;
  image.start = static_cast<int64_t>(r.prompt.size());
  const vision::ImageSpan span = vision::BuildSpan(plan, vision::SpanLayout::kVisionExp, image.start);
  for (vision::SpanRole role : span.roles) image.roles.push_back(static_cast<uint8_t>(role));
  image.image_rows = span.image_rows;
  image.key.fill(0x3c);
  r.prompt.insert(r.prompt.end(), image.roles.size(), kImageToken);
  r.images.push_back(std::move(image));
  for (int32_t t : engine::testing::RandomTokens(20, 22)) r.prompt.push_back(t == kImageToken ? 5 : t);
  r.max_tokens = 4;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.sampling.logprobs = true;
  return r;
}

struct Answer {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  protocol::Usage usage;
  std::string error;
  bool done = false;
};

Answer RunToEnd(EngineLoop& loop, protocol::GenerateRequest r) {
  Answer out;
  EXPECT_TRUE(loop.Submit(std::move(r), [&out](const protocol::GenerateEvent& e) {
    for (const auto& t : e.tokens) {
      out.tokens.push_back(t.token);
      out.logprobs.push_back(t.logprob);
    }
    if (!e.error.empty()) out.error = e.error;
    if (e.request_done) {
      out.usage = e.usage;
      out.done = true;
    }
  }).ok());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!out.done && std::chrono::steady_clock::now() < until)
    if (!loop.StepOnce()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(out.done);
  EXPECT_EQ(out.error, "");
  return out;
}

// The first token and its logprob straight from the engine: the whole prompt in one call, its
// span bidirectional (or not).
std::pair<int32_t, double> EngineFirstToken(const protocol::GenerateRequest& r, bool bidirectional) {
  const engine::Model& m = VisionExpModel();
  base::ThreadPool pool(2);
  engine::VisionTower tower(m, pool);
  const protocol::ImageInput& image = r.images[0];
  auto rows = tower.Encode(image.patches, image.vit_h, image.vit_w);
  EXPECT_TRUE(rows.ok());
  auto embeddings = engine::SpanEmbeddings(m, image.roles, image.image_rows, *rows);
  EXPECT_TRUE(embeddings.ok());
  std::vector<int32_t> offsets;
  for (size_t i = 0; i < image.roles.size(); ++i) offsets.push_back(static_cast<int32_t>(image.start + i));
  const auto part = engine::BidirectionalPart(m, image.roles);
  EXPECT_TRUE(part.has_value());
  const engine::TokenRange span{static_cast<int32_t>(image.start + part->first),
                                static_cast<int32_t>(image.start + part->second)};
  engine::Engine engine(m, engine::EngineOptions{});
  auto state = engine.NewSequence();
  engine::ForwardRequest req{state.get(), r.prompt, engine::LogitsMode::kLast};
  req.embedded_rows = offsets;
  req.embeddings = *embeddings;
  if (bidirectional) req.bidirectional = {&span, 1};
  auto result = engine.Forward({&req, 1});
  EXPECT_TRUE(result.ok());
  const float* logits = result->row(0, 0);
  const int64_t v = m.config().vocab_size;
  const int32_t best = static_cast<int32_t>(std::max_element(logits, logits + v) - logits);
  double sum = 0;
  for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(logits[i]) - logits[best]);
  return {best, -std::log(sum)};
}

TEST(EngineLoopVisionExp, EveryStepBudgetGivesTheWholePromptAnswer) {
  const protocol::GenerateRequest request = Request("r");
  const auto [first, first_logprob] = EngineFirstToken(request, true);
  const auto [causal_first, causal_logprob] = EngineFirstToken(request, false);
  // The window rule shows in the answer by far more than the tolerance below.
  EXPECT_GT(std::fabs(first_logprob - causal_logprob), 1e-2) << first_logprob << " vs causal " << causal_logprob;
  std::vector<Answer> answers;
  for (int64_t budget : {48, 4096}) {
    LoopConfig config;
    config.sched.max_step_tokens = budget;
    config.prefix_cache_bytes = 0;
    EngineLoop loop(VisionExpModel(), engine::EngineOptions{}, config);
    answers.push_back(RunToEnd(loop, Request("r")));
    loop.Stop();
  }
  ASSERT_EQ(answers[0].tokens.size(), 4u);
  EXPECT_EQ(answers[0].tokens, answers[1].tokens);
  EXPECT_EQ(answers[0].logprobs, answers[1].logprobs);
  EXPECT_EQ(answers[0].tokens[0], first);
  EXPECT_NEAR(answers[0].logprobs[0], first_logprob, 1e-4);
  EXPECT_GT(std::fabs(answers[0].logprobs[0] - causal_logprob), 1e-2);
}

TEST(EngineLoopVisionExp, ARepeatResumesBeforeTheSpanAndAnswersTheSame) {
  LoopConfig config;
  config.sched.max_step_tokens = 256;
  EngineLoop loop(VisionExpModel(), engine::EngineOptions{}, config);
  const Answer cold = RunToEnd(loop, Request("a"));
  const Answer warm = RunToEnd(loop, Request("b"));
  const protocol::GenerateRequest r = Request("x");
  const int64_t start = r.images[0].start + engine::BidirectionalPart(VisionExpModel(), r.images[0].roles)->first;
  EXPECT_EQ(cold.usage.cached_tokens, 0);
  // The snapshot at the end of the input (384) would sit inside the span (331..): it moved to 256.
  EXPECT_EQ(start, 331);
  EXPECT_EQ(warm.usage.cached_tokens, 256);
  EXPECT_EQ(warm.tokens, cold.tokens);
  EXPECT_EQ(warm.logprobs, cold.logprobs);
  loop.Stop();
}

}  // namespace
}  // namespace flashserve::serve
