// Snapshots: resuming from a copy or from serialised bytes at any position continues with
// exactly the logits of the uninterrupted run; corrupt or foreign bytes are clean errors.
#include <gtest/gtest.h>

#include "engine/state_codec.h"
#include "engine/test_model.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;
using testing::RandomTokens;
using testing::RunChunked;
using testing::TestModel;

class StateTest : public ::testing::TestWithParam<bool> {};  // param: QAT on

TEST_P(StateTest, ResumeFromSnapshotOrBytesMatchesUninterruptedRun) {
  EngineOptions opt;
  opt.qat = GetParam();
  const Model& model = TestModel();
  Engine engine(model, opt);
  const int total = 300;
  std::vector<int32_t> tokens = RandomTokens(total, 42);
  auto full_state = engine.NewSequence();
  std::vector<float> full = RunChunked(engine, full_state.get(), tokens, {total});
  for (int p : {1, 4, 5, 127, 128, 131, 256, 299}) {
    auto state = engine.NewSequence();
    std::vector<int32_t> head(tokens.begin(), tokens.begin() + p), tail(tokens.begin() + p, tokens.end());
    RunChunked(engine, state.get(), head, {p});
    std::unique_ptr<SequenceState> copy = state->Clone();
    std::string bytes = SerializeState(*state, model.config(), model.plan());
    auto restored = DeserializeState(bytes, model.config(), model.plan());
    ASSERT_TRUE(restored.ok()) << restored.error().ToString();
    EXPECT_EQ((*restored)->position(), p);
    std::vector<float> expected(full.begin() + static_cast<int64_t>(p) * 1280, full.end());
    EXPECT_TRUE(BitEqual(expected, RunChunked(engine, copy.get(), tail, {7, 1}))) << "clone at " << p;
    EXPECT_TRUE(BitEqual(expected, RunChunked(engine, restored->get(), tail, {tail.size() > 0 ? (int)tail.size() : 1})))
        << "bytes at " << p;
    EXPECT_TRUE(BitEqual(expected, RunChunked(engine, state.get(), tail, {1}))) << "original at " << p;
  }
}

TEST_P(StateTest, CompactEncodingIsUsedExactlyWhenQatMadeItLossless) {
  EngineOptions opt;
  opt.qat = GetParam();
  const Model& model = TestModel();
  Engine engine(model, opt);
  auto state = engine.NewSequence();
  RunChunked(engine, state.get(), RandomTokens(256, 5), {256});
  StateSizes sizes;
  std::string bytes = SerializeState(*state, model.config(), model.plan(), &sizes);
  EXPECT_EQ(sizes.total, static_cast<int64_t>(bytes.size()));
  // 6 layers, 127 ring rows of 512 channels: 711 bytes per row with the FP8 form, 2048 raw.
  const int64_t per_row = GetParam() ? 448 + 7 + 4 * 64 : 4 * 512;
  EXPECT_NEAR(static_cast<double>(sizes.rings), 6.0 * (127 * per_row + 17), 6 * 17);
  // At a 128-aligned position HCA carries are empty; CSA carries hold one pool per compressor.
  EXPECT_LT(sizes.carries, 2 * 3 * 4 * (512 + 128) + 100);
  std::printf("position 256, QAT %s: total %ld B, rings %ld B, carries %ld B, entries %ld B\n",
              GetParam() ? "on" : "off", static_cast<long>(sizes.total), static_cast<long>(sizes.rings),
              static_cast<long>(sizes.carries), static_cast<long>(sizes.entries));
}

TEST(StateCodecTest, CorruptTruncatedOrForeignBytesAreRejected) {
  const Model& model = TestModel();
  Engine engine(model, EngineOptions{});
  auto state = engine.NewSequence();
  RunChunked(engine, state.get(), RandomTokens(140, 9), {140});
  std::string bytes = SerializeState(*state, model.config(), model.plan());
  for (size_t at : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    std::string bad = bytes;
    bad[at] ^= 0x20;
    auto r = DeserializeState(bad, model.config(), model.plan());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), base::ErrorCode::kDataLoss);
  }
  for (size_t len : {size_t{0}, size_t{7}, size_t{40}, bytes.size() - 9}) {
    auto r = DeserializeState(bytes.substr(0, len), model.config(), model.plan());
    EXPECT_FALSE(r.ok()) << len;
  }
  model::ModelConfig other = model.config();
  other.num_layers = 5;
  other.compress_ratios.resize(6);
  auto r = DeserializeState(bytes, other, model::BuildLayerPlan(other));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), base::ErrorCode::kBadState);
}

INSTANTIATE_TEST_SUITE_P(Qat, StateTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "QatOn" : "QatOff"; });

}  // namespace
}  // namespace flashserve::engine

namespace flashserve::engine {
namespace {

TEST(StateBlocksTest, BoundaryPlusBlocksResumesExactly) {
  const Model& model = testing::TestModel();
  Engine engine(model, EngineOptions{});
  std::vector<int32_t> tokens = testing::RandomTokens(400, 17);
  auto full_state = engine.NewSequence();
  std::vector<float> full = testing::RunChunked(engine, full_state.get(), tokens, {400});
  for (int p : {128, 256, 300, 131, 5}) {
    auto state = engine.NewSequence();
    std::vector<int32_t> head(tokens.begin(), tokens.begin() + p), tail(tokens.begin() + p, tokens.end());
    testing::RunChunked(engine, state.get(), head, {p});
    std::vector<std::string> blocks;
    for (int64_t b = 0; b < p / kBlockTokens; ++b) blocks.push_back(SerializeBlock(*state, model.config(), model.plan(), b));
    StateSizes sizes;
    std::string boundary = SerializeBoundary(*state, model.config(), model.plan(), &sizes);
    if (p % kBlockTokens == 0) {  // aligned: every entry section is empty (17-byte header each)
      int64_t sections = 0;
      for (const auto& spec : model.plan())
        if (!spec.is_mtp) sections += (spec.compress_ratio > 0) + (spec.attention == model::AttentionKind::kCsa);
      EXPECT_EQ(sizes.entries, 17 * sections);
    }
    std::vector<std::string_view> views(blocks.begin(), blocks.end());
    auto restored = AssembleState(boundary, views, model.config(), model.plan());
    ASSERT_TRUE(restored.ok()) << restored.error().ToString();
    std::vector<float> expected(full.begin() + static_cast<int64_t>(p) * 1280, full.end());
    EXPECT_TRUE(testing::BitEqual(expected, testing::RunChunked(engine, restored->get(), tail, {static_cast<int>(tail.size())})))
        << "position " << p;
    if (!views.empty()) {  // wrong or missing blocks are refused
      auto missing = AssembleState(boundary, std::span(views).subspan(1), model.config(), model.plan());
      EXPECT_EQ(missing.error().code(), base::ErrorCode::kInvalidArgument);
      std::string bad = blocks[0];
      bad[20] ^= 1;
      views[0] = bad;
      EXPECT_EQ(AssembleState(boundary, views, model.config(), model.plan()).error().code(), base::ErrorCode::kDataLoss);
    }
    if (views.size() >= 2) {
      std::swap(views[0], views[1]);
      views[1] = blocks[0];
      views[0] = blocks[1];
      EXPECT_EQ(AssembleState(boundary, views, model.config(), model.plan()).error().code(), base::ErrorCode::kBadState);
    }
  }
}

}  // namespace
}  // namespace flashserve::engine
