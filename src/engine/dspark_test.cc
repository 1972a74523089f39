// The DSpark drafter (engine/dspark.cc): its context KV is the same however the trunk's tokens
// arrive (one call, chunks, token by token, alone or batched) and survives a snapshot; a draft
// leaves the state as it was, is the same alone or batched and for any count asked (the block is
// always whole), and depends on the context; refusals change nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/state_codec.h"
#include "engine/test_model.h"

namespace flashserve::engine {
namespace {

using testing::RandomTokens;
using testing::RunChunked;
using testing::StateDifference;

struct Drafted {
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
};

Drafted DraftOne(Engine& engine, SequenceState* state, int32_t token, int k) {
  DraftRequest d{state, token, k};
  std::vector<std::vector<float>> confidence;
  auto made = engine.DraftDspark({&d, 1}, &confidence);
  EXPECT_TRUE(made.ok()) << made.error().ToString();
  if (!made.ok()) return {};
  return {(*made)[0], confidence[0]};
}

TEST(DsparkContext, IsTheSameHoweverTheTokensArrive) {
  const Model& model = testing::TestModelDspark();
  ASSERT_EQ(model.config().dspark.stages(), 3);
  Engine engine(model, EngineOptions{});
  const std::vector<int32_t> tokens = RandomTokens(150, 41);
  auto one = engine.NewSequence(true);
  RunChunked(engine, one.get(), tokens, {150});
  EXPECT_EQ(one->mtp_position(), 150);
  for (const std::vector<int>& chunks : {std::vector<int>{1}, std::vector<int>{7, 3}, std::vector<int>{64}}) {
    auto chunked = engine.NewSequence(true);
    RunChunked(engine, chunked.get(), tokens, chunks);
    EXPECT_EQ(StateDifference(*chunked, *one), "") << "chunks of " << chunks[0];
  }
  // Batched with a sequence without drafter layers and another with: each equals its run alone.
  auto a = engine.NewSequence(true), b = engine.NewSequence(false), c = engine.NewSequence(true);
  const std::vector<int32_t> other = RandomTokens(40, 42);
  ForwardRequest batch[3] = {{a.get(), tokens, LogitsMode::kLast}, {b.get(), other, LogitsMode::kLast},
                             {c.get(), other, LogitsMode::kLast}};
  ASSERT_TRUE(engine.Forward(batch).ok());
  EXPECT_EQ(StateDifference(*a, *one), "");
  auto alone = engine.NewSequence(true);
  RunChunked(engine, alone.get(), other, {40});
  EXPECT_EQ(StateDifference(*c, *alone), "");
  // Every stage's ring holds a context row for every position so far (none left zero).
  for (int l = model.config().num_layers; l < one->num_layers(); ++l) {
    const LayerState& ls = one->layer(l);
    for (int slot = 0; slot < ls.window; ++slot) {
      double norm = 0;
      for (int k = 0; k < ls.dim; ++k) norm += std::abs(ls.ring[static_cast<size_t>(slot * ls.dim + k)]);
      EXPECT_GT(norm, 0.0) << "layer " << l << " slot " << slot;
    }
  }
  // A snapshot resumes with the same drafts.
  auto restored = DeserializeState(SerializeState(*one, model.config(), model.plan()), model.config(), model.plan());
  ASSERT_TRUE(restored.ok()) << restored.error().ToString();
  const Drafted x = DraftOne(engine, one.get(), 99, 5), y = DraftOne(engine, restored->get(), 99, 5);
  EXPECT_EQ(x.tokens, y.tokens);
  EXPECT_EQ(x.confidence, y.confidence);
}

TEST(DraftDspark, LeavesTheStateAndIsTheSameAloneBatchedOrShorter) {
  const Model& model = testing::TestModelDspark();
  const int block = model.config().dspark.block_size;
  Engine engine(model, EngineOptions{});
  auto a = engine.NewSequence(true), b = engine.NewSequence(true);
  RunChunked(engine, a.get(), RandomTokens(126, 51), {126});
  RunChunked(engine, b.get(), RandomTokens(30, 52), {30});
  auto a0 = a->Clone(), b0 = b->Clone();
  DraftRequest batch[2] = {{a.get(), 77, block}, {b.get(), 91, 2}};
  std::vector<std::vector<float>> confidence;
  auto drafts = engine.DraftDspark(batch, &confidence);
  ASSERT_TRUE(drafts.ok()) << drafts.error().ToString();
  ASSERT_EQ((*drafts)[0].size(), static_cast<size_t>(block));
  ASSERT_EQ((*drafts)[1].size(), 2u);
  ASSERT_EQ(confidence[0].size(), static_cast<size_t>(block));
  for (float p : confidence[0]) EXPECT_TRUE(p > 0.0f && p < 1.0f) << p;
  EXPECT_EQ(StateDifference(*a, *a0), "");
  EXPECT_EQ(StateDifference(*b, *b0), "");
  const Drafted alone = DraftOne(engine, a.get(), 77, block);
  EXPECT_EQ(alone.tokens, (*drafts)[0]);
  EXPECT_EQ(alone.confidence, confidence[0]);
  for (int k = 1; k < block; ++k) {  // fewer asked: the same block, its first k drafts
    const Drafted fewer = DraftOne(engine, a.get(), 77, k);
    EXPECT_EQ(fewer.tokens, std::vector<int32_t>(alone.tokens.begin(), alone.tokens.begin() + k));
    EXPECT_EQ(fewer.confidence, std::vector<float>(alone.confidence.begin(), alone.confidence.begin() + k));
  }
  EXPECT_EQ(engine.Draft(batch)->at(0), (*drafts)[0]);  // the checkpoint's drafter is DSpark
  // A request asking none between two others: nothing for it, the others as alone.
  auto c = engine.NewSequence(true);
  RunChunked(engine, c.get(), RandomTokens(12, 53), {12});
  DraftRequest mixed[3] = {{b.get(), 91, 2}, {c.get(), 5, 0}, {a.get(), 77, block}};
  auto some = engine.DraftDspark(mixed);
  ASSERT_TRUE(some.ok()) << some.error().ToString();
  EXPECT_EQ((*some)[0], (*drafts)[1]);
  EXPECT_TRUE((*some)[1].empty());
  EXPECT_EQ((*some)[2], alone.tokens);
}

// The drafts read the context a block's window holds: a ring row no block row sees (position
// p - W, whose slot the anchor's row takes) changes nothing; the row before the anchor does.
TEST(DraftDspark, ReadsTheWindowBeforeTheAnchor) {
  const Model& model = testing::TestModelDspark();
  const int window = model.config().sliding_window, first = model.config().num_layers;
  Engine engine(model, EngineOptions{});
  auto state = engine.NewSequence(true);
  RunChunked(engine, state.get(), RandomTokens(200, 65), {200});
  const int64_t p = state->position();
  const Drafted base = DraftOne(engine, state.get(), 9, 5);
  auto spoil = [&](int64_t position) {
    auto other = state->Clone();
    for (int l = first; l < other->num_layers(); ++l) {
      LayerState& ls = other->layer(l);
      for (int k = 0; k < ls.dim; ++k) ls.ring[static_cast<size_t>((position % window) * ls.dim + k)] += 3.0f;
    }
    return DraftOne(engine, other.get(), 9, 5);
  };
  const Drafted stale = spoil(p - window), recent = spoil(p - 1);
  EXPECT_EQ(stale.tokens, base.tokens);
  EXPECT_EQ(stale.confidence, base.confidence);
  EXPECT_NE(recent.confidence, base.confidence);
}

// The drafts read the context: the same anchor after another prompt, or after none (drafter
// layers added fresh at the position), gives other confidences.
TEST(DraftDspark, DependsOnTheContext) {
  const Model& model = testing::TestModelDspark();
  Engine engine(model, EngineOptions{});
  const std::vector<int32_t> p1 = RandomTokens(60, 61), p2 = RandomTokens(60, 62);
  auto a = engine.NewSequence(true), b = engine.NewSequence(true), plain = engine.NewSequence(false);
  RunChunked(engine, a.get(), p1, {60});
  RunChunked(engine, b.get(), p2, {60});
  RunChunked(engine, plain.get(), p1, {60});
  plain->SetMtp(true, model.config(), model.plan());
  ASSERT_TRUE(plain->with_mtp());
  EXPECT_EQ(plain->mtp_position(), 60);
  const Drafted x = DraftOne(engine, a.get(), 5, 3), y = DraftOne(engine, b.get(), 5, 3),
                z = DraftOne(engine, plain.get(), 5, 3);
  ASSERT_EQ(x.confidence.size(), 3u);
  EXPECT_NE(x.confidence, y.confidence);
  EXPECT_NE(x.confidence, z.confidence);
}

TEST(DraftDspark, RefusesAndChangesNothing) {
  const Model& model = testing::TestModelDspark();
  const int block = model.config().dspark.block_size;
  Engine engine(model, EngineOptions{});
  auto a = engine.NewSequence(true), plain = engine.NewSequence(false);
  RunChunked(engine, a.get(), RandomTokens(20, 71), {20});
  RunChunked(engine, plain.get(), RandomTokens(20, 71), {20});
  const auto before = a->Clone();
  DraftRequest too_many{a.get(), 7, block + 1}, outside{a.get(), 1280, 1}, none{plain.get(), 7, 1};
  EXPECT_FALSE(engine.DraftDspark({&too_many, 1}).ok());
  EXPECT_FALSE(engine.DraftDspark({&outside, 1}).ok());
  EXPECT_FALSE(engine.DraftDspark({&none, 1}).ok());
  DraftRequest twice[2] = {{a.get(), 7, 1}, {a.get(), 8, 1}};
  EXPECT_FALSE(engine.DraftDspark(twice).ok());
  DraftRequest fine{a.get(), 7, 1};
  EXPECT_FALSE(engine.DraftMtp({&fine, 1}).ok());  // no MTP block here
  ForwardRequest mtp{a.get(), std::vector<int32_t>{3}, LogitsMode::kLast};
  mtp.mtp_logits = true;
  EXPECT_FALSE(engine.Forward({&mtp, 1}).ok());
  EXPECT_EQ(StateDifference(*a, *before), "");
  // And an MTP model refuses DSpark drafts.
  Engine mtp_engine(testing::TestModel(), EngineOptions{});
  auto m = mtp_engine.NewSequence(true);
  RunChunked(mtp_engine, m.get(), RandomTokens(5, 72), {5});
  DraftRequest d{m.get(), 7, 1};
  EXPECT_FALSE(mtp_engine.DraftDspark({&d, 1}).ok());
  // A block must fit in the context whole.
  const int64_t last = model.config().max_position - block;
  auto end = a->Clone();
  end->set_position(last);
  EXPECT_TRUE(engine.CanDraft(*end));
  end->set_position(last + 1);
  EXPECT_FALSE(engine.CanDraft(*end));
  DraftRequest past{end.get(), 7, 1};
  EXPECT_FALSE(engine.DraftDspark({&past, 1}).ok());
}

}  // namespace
}  // namespace flashserve::engine
