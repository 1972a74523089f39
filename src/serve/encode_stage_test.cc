// The encode stage and the encoder cache: image payloads refuse damage; tower outputs survive a
// restart through the KV store's disk tier; the engine loop encodes off its thread and gives
// the same tokens from a fresh encode, the memory cache, the store after a restart, and a
// picture imported from another worker (which then runs no tower; a damaged one is re-encoded);
// cancel while encoding.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/clock.h"
#include "engine/test_image_prompt.h"
#include "kvstore/test_util.h"
#include "serve/encoder_cache.h"
#include "serve/engine_loop.h"
#include "serve/test_store.h"
#include "vision/plan.h"

namespace flashserve::serve {
namespace {

constexpr int32_t kImageToken = 1264;

const engine::Model& VisionModel() {
  static std::unique_ptr<engine::Model> m;
  if (!m) {
    model::ModelConfig c = engine::testing::TinyV41EngramConfig();
    c.image_token_id = kImageToken;
    m = engine::testing::WithSyntheticEngramMap(engine::testing::WriteAndLoad(c, false, "_v41_vision_serve"));
  }
  return *m;
}

std::unique_ptr<kvstore::KvStore> DiskStore(const std::string& dir, const base::Clock& clock) {
  return testing::OpenTestStore(VisionModel(), clock, {dir, ""});
}

// A picture of random patches on a 7 x 11 patch grid (a 3 x 4 aligner grid), its span at `start`.
protocol::ImageInput Picture(uint32_t seed, int64_t start) {
  protocol::ImageInput image;
  image.vit_h = 7;
  image.vit_w = 11;
  image.patches = engine::testing::RandomPatches(VisionModel(), image.vit_h, image.vit_w, seed);
  vision::ImagePlan plan;
  plan.llm_h = 3;
  plan.llm_w = 4;
  const vision::ImageSpan span = vision::BuildSpan(plan, vision::SpanLayout::kV41, 0);
  for (vision::SpanRole r : span.roles) image.roles.push_back(static_cast<uint8_t>(r));
  image.image_rows = span.image_rows;
  image.start = start;
  image.key.fill(0);
  image.key[0] = static_cast<uint8_t>(seed);
  image.key[1] = 0xa5;
  return image;
}

protocol::GenerateRequest ImageRequest(std::string id, uint32_t picture) {
  protocol::GenerateRequest r;
  r.id = std::move(id);
  for (int32_t t : engine::testing::RandomTokens(40, 11)) r.prompt.push_back(t == kImageToken ? 5 : t);
  r.images.push_back(Picture(picture, static_cast<int64_t>(r.prompt.size())));
  r.prompt.insert(r.prompt.end(), r.images[0].roles.size(), kImageToken);
  for (int32_t t : engine::testing::RandomTokens(30, 12)) r.prompt.push_back(t == kImageToken ? 5 : t);
  r.max_tokens = 6;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.sampling.logprobs = true;
  r.sampling.seed = 1;
  r.sampling.has_seed = true;
  return r;
}

struct Collected {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  protocol::FinishReason finish = protocol::FinishReason::kNone;
  std::string error;
  bool done = false;
};

EventSink Collect(Collected* out) {
  return [out](const protocol::GenerateEvent& e) {
    for (const auto& t : e.tokens) {
      out->tokens.push_back(t.token);
      out->logprobs.push_back(t.logprob);
    }
    if (e.finish != protocol::FinishReason::kNone) out->finish = e.finish;
    if (!e.error.empty()) out->error = e.error;
    if (e.request_done) out->done = true;
  };
}

bool StepUntilDone(EngineLoop& s, const Collected& out, double seconds = 60) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!out.done && std::chrono::steady_clock::now() < until) {
    if (!s.StepOnce()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out.done;
}

Collected RunOne(EngineLoop& s, protocol::GenerateRequest r) {
  Collected out;
  EXPECT_TRUE(s.Submit(std::move(r), Collect(&out)).ok());
  EXPECT_TRUE(StepUntilDone(s, out));
  EXPECT_EQ(out.error, "");
  return out;
}

TEST(ImageRowsPayload, RoundTripsAndRefusesDamage) {
  const std::vector<float> rows = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.125f};
  const base::SharedBytes payload = EncodeImageRows(rows, 3);
  auto back = DecodeImageRows(*payload, 3);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(**back, rows);
  EXPECT_FALSE(DecodeImageRows(*payload, 2).ok());                                  // another width
  EXPECT_FALSE(DecodeImageRows(payload->substr(0, payload->size() - 1), 3).ok());   // truncated
  std::string bad(*payload);
  bad[0] = 'X';
  EXPECT_FALSE(DecodeImageRows(bad, 3).ok());
  EXPECT_FALSE(DecodeImageRows(std::string_view(), 3).ok());
}

TEST(EncoderCacheTest, KeepsWithinItsBudgetAndSurvivesARestartThroughTheStore) {
  const kvstore::testing::TempDir temp;
  base::SystemClock clock;
  ImageKey a{}, b{};
  a[0] = 1;
  b[0] = 2;
  auto rows = std::make_shared<const std::vector<float>>(std::vector<float>(64 * 4, 0.5f));  // 1 KiB
  {
    auto store = DiskStore(temp.path(), clock);
    EncoderCache cache(64, 1024, store.get(), "agent");
    cache.Insert(a, rows, 0.25);
    cache.Insert(b, rows, 0.25);  // evicts a from memory (the budget holds one)
    EXPECT_EQ(cache.stats().bytes, 1024);
    EXPECT_EQ(cache.stats().misses, 2);
    EXPECT_DOUBLE_EQ(cache.stats().encode_seconds, 0.5);
    ASSERT_NE(cache.Find(a, false), nullptr);  // still in the store's memory tier
    EXPECT_EQ(cache.stats().store_hits, 1);
    store->Close();
  }
  auto store = DiskStore(temp.path(), clock);
  EncoderCache cache(64, 1 << 20, store.get(), "agent");
  ImageKey absent{};
  absent[0] = 9;
  EXPECT_EQ(cache.Find(absent, true), nullptr);
  const ImageRows found = cache.Find(a, /*outer_tiers=*/true);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(*found, *rows);
  EXPECT_EQ(cache.stats().store_hits, 1);
  EXPECT_EQ(cache.stats().misses, 0);
  EXPECT_TRUE(cache.Import(absent, EncodeImageRows(*rows, 64)).ok());
  EXPECT_FALSE(cache.Import(absent, EncodeImageRows(*rows, 32)).ok());  // another model's width
  EXPECT_EQ(cache.stats().imported, 1);
  const base::SharedBytes exported = cache.Export(absent);
  ASSERT_NE(exported, nullptr);
  EXPECT_EQ(**DecodeImageRows(*exported, 64), *rows);
}

TEST(EngineLoopImages, EveryWayToThePicturesGivesTheSameTokens) {
  const kvstore::testing::TempDir temp;
  base::SystemClock clock;
  LoopConfig config;
  config.image_ttl_class = "agent";
  Collected cold, warm, restarted, imported, other;
  ServiceStats stats;
  base::SharedBytes payload;
  ImageKey key = ImageRequest("x", 3).images[0].key;
  {
    EngineLoop s(VisionModel(), engine::EngineOptions{}, config, DiskStore(temp.path(), clock));
    cold = RunOne(s, ImageRequest("cold", 3));
    protocol::GenerateRequest again = ImageRequest("warm", 3);
    again.prompt[0] ^= 1;  // no prefix-cache hit: the picture itself must come from the encoder cache
    warm = RunOne(s, again);
    other = RunOne(s, ImageRequest("other", 4));
    stats = s.Stats();
    payload = s.ExportImage(key);
    s.Stop();
  }
  EXPECT_EQ(stats.encoder_cache_misses, 2);
  EXPECT_EQ(stats.encoder_cache_hits, 1);
  EXPECT_NE(cold.tokens, other.tokens);  // the picture decides the answer
  ASSERT_NE(payload, nullptr);
  {
    EngineLoop s(VisionModel(), engine::EngineOptions{}, config, DiskStore(temp.path(), clock));
    protocol::GenerateRequest again = ImageRequest("restarted", 3);
    again.prompt[0] ^= 1;
    restarted = RunOne(s, again);
    EXPECT_EQ(s.Stats().encoder_cache_misses, 0);
    EXPECT_EQ(s.Stats().encoder_store_hits, 1);
    EXPECT_EQ(restarted.tokens, warm.tokens);
    EXPECT_EQ(restarted.logprobs, warm.logprobs);
  }
  {
    EngineLoop s(VisionModel(), engine::EngineOptions{}, config);  // another worker: memory only
    CacheObject object{protocol::KvObjectKind::kImage, key, 12, payload};
    s.ImportObject(object);
    imported = RunOne(s, ImageRequest("imported", 3));
    EXPECT_EQ(s.Stats().encoder_cache_misses, 0);
    EXPECT_EQ(s.Stats().encoder_imported, 1);
  }
  EXPECT_EQ(imported.tokens, cold.tokens);
  EXPECT_EQ(imported.logprobs, cold.logprobs);
  {  // a damaged payload from another worker is refused: the picture is encoded here instead
    EngineLoop s(VisionModel(), engine::EngineOptions{}, config);
    std::string damaged(*payload);
    damaged.resize(damaged.size() - 4);
    s.ImportObject(CacheObject{protocol::KvObjectKind::kImage, key, 12, base::MakeSharedBytes(std::move(damaged))});
    const Collected reencoded = RunOne(s, ImageRequest("damaged", 3));
    EXPECT_EQ(s.Stats().encoder_imported, 0);
    EXPECT_EQ(s.Stats().encoder_cache_misses, 1);
    EXPECT_EQ(reencoded.tokens, cold.tokens);
    EXPECT_EQ(reencoded.logprobs, cold.logprobs);
  }
  ASSERT_EQ(cold.tokens.size(), 6u);
}

// Workers that share an L3 directory share their pictures: what one encoded, another reads
// from the shared tier at once (a probe on the miss, before any rescan) and runs no tower.
TEST(EngineLoopImages, PicturesAreSharedThroughTheSharedTier) {
  const kvstore::testing::TempDir temp;
  base::SystemClock clock;
  auto shared_store = [&] { return testing::OpenTestStore(VisionModel(), clock, {"", temp.path()}); };
  EngineLoop a(VisionModel(), engine::EngineOptions{}, LoopConfig{}, shared_store());
  EngineLoop b(VisionModel(), engine::EngineOptions{}, LoopConfig{}, shared_store());  // indexed before a writes
  const Collected first = RunOne(a, ImageRequest("a", 8));
  a.Stop();  // flushes the write-through to the shared directory
  protocol::GenerateRequest other = ImageRequest("b", 8);
  other.prompt[0] ^= 1;  // no prefix-cache help: the picture itself comes from the shared tier
  const Collected second = RunOne(b, other);
  EXPECT_EQ(b.Stats().encoder_cache_misses, 0);
  EXPECT_EQ(b.Stats().encoder_store_hits, 1);
  EXPECT_EQ(first.tokens.size(), second.tokens.size());
}

// The text before the picture is computed while the picture encodes: the step that admits the
// request cannot see the encode stage's answer yet (commands are applied between steps), so
// its text runs then; the answer is the one of the whole prompt.
TEST(EngineLoopImages, TextBeforeThePictureRunsWhileItEncodes) {
  EngineLoop s(VisionModel(), engine::EngineOptions{}, LoopConfig{});
  const Collected first = RunOne(s, ImageRequest("first", 3));
  const int64_t text = ImageRequest("x", 3).images[0].start;
  EXPECT_EQ(s.Stats().prompt_tokens_while_encoding, text);
  protocol::GenerateRequest again = ImageRequest("again", 3);
  again.prompt[0] ^= 1;  // no prefix-cache help
  const Collected second = RunOne(s, again);
  EXPECT_EQ(s.Stats().prompt_tokens_while_encoding, 2 * text);
  EXPECT_EQ(first.tokens.size(), 6u);
  EXPECT_EQ(second.tokens.size(), 6u);
}

TEST(EngineLoopImages, CancelWhileEncodingEndsTheRequest) {
  EngineLoop s(VisionModel(), engine::EngineOptions{}, LoopConfig{});
  Collected out;
  ASSERT_TRUE(s.Submit(ImageRequest("c", 5), Collect(&out)).ok());
  s.Cancel("c");
  ASSERT_TRUE(StepUntilDone(s, out));
  EXPECT_EQ(out.finish, protocol::FinishReason::kCancelled);
  EXPECT_TRUE(out.tokens.empty());
  // The loop keeps serving: the same picture afterwards runs normally.
  const Collected after = RunOne(s, ImageRequest("d", 5));
  EXPECT_EQ(after.tokens.size(), 6u);
}

TEST(EngineLoopImages, APictureThatDoesNotMatchItsSpanIsAnError) {
  EngineLoop s(VisionModel(), engine::EngineOptions{}, LoopConfig{});
  protocol::GenerateRequest r = ImageRequest("bad", 6);
  r.images[0].vit_h = 4;  // 2 aligner rows in height: the span asks for row 11
  const int p = VisionModel().config().vision.patch_size;
  r.images[0].patches.resize(static_cast<size_t>(4 * 11 * 3 * p * p));
  Collected out;
  ASSERT_TRUE(s.Submit(r, Collect(&out)).ok());
  ASSERT_TRUE(StepUntilDone(s, out));
  EXPECT_EQ(out.finish, protocol::FinishReason::kError);
  EXPECT_NE(out.error.find("image encoding failed"), std::string::npos) << out.error;
  EXPECT_EQ(s.Stats().running, 0);
}

}  // namespace
}  // namespace flashserve::serve
