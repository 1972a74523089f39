// Speculative decoding's engine side: a logged call rolled back to any prefix equals, bit for bit,
// the state of a call that read only that prefix (V4 with its MTP block, V4.1, V4.1 Engram);
// MTP drafts leave the state as it was and start from the MTP head's argmax; a greedy
// draft-verify-rollback loop emits exactly the tokens of plain decoding.
#include <gtest/gtest.h>

#include <cstring>
#include <span>

#include "engine/test_model.h"

namespace flashserve::engine {
namespace {

using testing::RandomTokens;
using testing::RunChunked;
using testing::Same;
using testing::StateDifference;

std::vector<float> Step(Engine& engine, SequenceState* state, std::vector<int32_t> tokens, UndoLog* undo = nullptr,
                        std::vector<float>* mtp = nullptr) {
  ForwardRequest req{state, tokens, LogitsMode::kAll};
  req.undo = undo;
  req.mtp_logits = mtp != nullptr && state->with_mtp() && engine.model().config().num_mtp_layers > 0;
  auto r = engine.Forward({&req, 1});
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  if (!r.ok()) return {};
  if (mtp) *mtp = r->mtp_logits;
  return r->logits;
}

// For prefixes that put the call across compressor window ends (4 and 128), every chunk size up
// to 8 and every keep: rolled back == plain, and both continue to the same logits.
void CheckRollbacks(const Model& model, bool with_mtp) {
  Engine engine(model, EngineOptions{});
  const std::vector<int32_t> tokens = RandomTokens(150, 7);
  int checked = 0;
  for (int prefix : {1, 5, 121, 126, 127}) {
    auto base = engine.NewSequence(with_mtp);
    RunChunked(engine, base.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + prefix), {64});
    for (int n : {1, 3, 8}) {
      const std::vector<int32_t> chunk(tokens.begin() + prefix, tokens.begin() + prefix + n);
      for (int keep = 0; keep <= n; ++keep) {
        auto rolled = base->Clone();
        UndoLog log;
        Step(engine, rolled.get(), chunk, &log);
        ASSERT_TRUE(engine.Rollback(rolled.get(), log, keep).ok());
        auto plain = base->Clone();
        if (keep > 0) Step(engine, plain.get(), std::vector<int32_t>(chunk.begin(), chunk.begin() + keep));
        ASSERT_EQ(StateDifference(*rolled, *plain), "") << "prefix " << prefix << " n " << n << " keep " << keep;
        const std::vector<int32_t> next(tokens.begin() + prefix + keep, tokens.begin() + prefix + keep + 2);
        std::vector<float> mtp_a, mtp_b;
        EXPECT_TRUE(Same(Step(engine, rolled.get(), next, nullptr, &mtp_a), Step(engine, plain.get(), next, nullptr, &mtp_b)));
        EXPECT_TRUE(Same(mtp_a, mtp_b));
        EXPECT_EQ(StateDifference(*rolled, *plain), "");
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 5 * (2 + 4 + 9));
}

TEST(Rollback, V4WithMtpEqualsAPlainRun) { CheckRollbacks(testing::TestModel(), true); }
TEST(Rollback, V4WithDsparkEqualsAPlainRun) { CheckRollbacks(testing::TestModelDspark(), true); }
TEST(Rollback, V4WithoutMtpEqualsAPlainRun) { CheckRollbacks(testing::TestModel(), false); }
TEST(Rollback, V41EqualsAPlainRun) { CheckRollbacks(testing::TestModelV41(), false); }
TEST(Rollback, V41EngramEqualsAPlainRun) { CheckRollbacks(testing::TestModelV41Engram(), false); }

TEST(Rollback, RefusesAForeignLogOrKeepAndChangesNothing) {
  Engine engine(testing::TestModel(), EngineOptions{});
  auto state = engine.NewSequence(true);
  Step(engine, state.get(), RandomTokens(10, 3));
  UndoLog log;
  Step(engine, state.get(), RandomTokens(4, 4), &log);
  auto before = state->Clone();
  EXPECT_FALSE(engine.Rollback(state.get(), log, 5).ok());
  EXPECT_FALSE(engine.Rollback(state.get(), log, -1).ok());
  Step(engine, before.get(), {9});
  EXPECT_FALSE(engine.Rollback(before.get(), log, 1).ok());  // the log is no longer its last call
  EXPECT_TRUE(engine.Rollback(state.get(), log, 4).ok());    // keep everything: nothing to do
  EXPECT_EQ(state->position(), 14);
}

TEST(Rollback, ALoggedCallIsBoundedByTheWindow) {
  const Model& model = testing::TestModel();
  Engine engine(model, EngineOptions{});
  auto state = engine.NewSequence(true);
  UndoLog log;
  const std::vector<int32_t> tokens = RandomTokens(model.config().sliding_window + 1, 5);
  ForwardRequest req{state.get(), tokens, LogitsMode::kLast};
  req.undo = &log;
  EXPECT_FALSE(engine.Forward({&req, 1}).ok());
  EXPECT_EQ(state->position(), 0);
  // Nor may it hold a bidirectional span (a rollback inside one would not be exact).
  const TokenRange span{0, 2};
  ForwardRequest spans{state.get(), std::span<const int32_t>(tokens.data(), 4), LogitsMode::kLast};
  spans.undo = &log;
  spans.bidirectional = {&span, 1};
  auto refused = engine.Forward({&spans, 1});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("bidirectional"), std::string::npos);
  EXPECT_EQ(state->position(), 0);
}

int32_t Argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

TEST(DraftMtp, LeavesTheStateAndStartsFromTheHeadsArgmax) {
  const Model& model = testing::TestModel();
  const int64_t vocab = model.config().vocab_size;
  Engine engine(model, EngineOptions{});
  auto a = engine.NewSequence(true), b = engine.NewSequence(true);
  Step(engine, a.get(), RandomTokens(126, 11));
  Step(engine, b.get(), RandomTokens(40, 12));
  auto a0 = a->Clone(), b0 = b->Clone();
  DraftRequest batch[2] = {{a.get(), 77, 4}, {b.get(), 91, 2}};
  auto drafts = engine.DraftMtp(batch);
  ASSERT_TRUE(drafts.ok()) << drafts.error().ToString();
  ASSERT_EQ((*drafts)[0].size(), 4u);
  ASSERT_EQ((*drafts)[1].size(), 2u);
  EXPECT_EQ(StateDifference(*a, *a0), "");
  EXPECT_EQ(StateDifference(*b, *b0), "");
  // The first draft is what the plain forward's MTP row predicts after the token.
  std::vector<float> mtp;
  Step(engine, a0.get(), {77}, nullptr, &mtp);
  ASSERT_EQ(mtp.size(), static_cast<size_t>(vocab));
  EXPECT_EQ((*drafts)[0][0], Argmax(mtp.data(), vocab));
  // Alone == batched.
  DraftRequest alone{b.get(), 91, 2};
  auto solo = engine.DraftMtp({&alone, 1});
  ASSERT_TRUE(solo.ok());
  EXPECT_EQ((*solo)[0], (*drafts)[1]);
  // Refused: a state without MTP, or before its first forward.
  auto plain = engine.NewSequence(false);
  Step(engine, plain.get(), {5, 6});
  DraftRequest bad{plain.get(), 1, 1};
  EXPECT_FALSE(engine.DraftMtp({&bad, 1}).ok());
  auto fresh = engine.NewSequence(true);
  DraftRequest early{fresh.get(), 1, 1};
  EXPECT_FALSE(engine.DraftMtp({&early, 1}).ok());
  // A token outside the vocabulary, a draft count of the window (its verify call would be
  // longer than a logged call may be), a state twice: refused, the states unchanged.
  const auto before = a->Clone();
  DraftRequest outside{a.get(), static_cast<int32_t>(vocab), 1};
  EXPECT_FALSE(engine.DraftMtp({&outside, 1}).ok());
  DraftRequest too_many{a.get(), 77, model.config().sliding_window};
  EXPECT_FALSE(engine.DraftMtp({&too_many, 1}).ok());
  DraftRequest twice[2] = {{a.get(), 77, 1}, {a.get(), 78, 1}};
  EXPECT_FALSE(engine.DraftMtp(twice).ok());
  EXPECT_EQ(StateDifference(*a, *before), "");
}

// Greedy decoding with K drafts per step from the model's drafter, verified in one forward and
// rolled back to the accepted prefix, emits exactly the plain greedy tokens and ends in the same
// state. The test model's drafts are often wrong, so accepts and rejects both happen.
void CheckGreedySpeculation(const Model& model, const std::vector<int>& ks) {
  const int64_t vocab = model.config().vocab_size;
  Engine engine(model, EngineOptions{});
  const std::vector<int32_t> prompt = RandomTokens(100, 21);
  const int total = 48;
  // Plain greedy.
  auto plain = engine.NewSequence(true);
  std::vector<float> logits = Step(engine, plain.get(), prompt);
  std::vector<int32_t> expected = {Argmax(logits.data() + (prompt.size() - 1) * vocab, vocab)};
  while (static_cast<int>(expected.size()) < total) {
    logits = Step(engine, plain.get(), {expected.back()});
    expected.push_back(Argmax(logits.data(), vocab));
  }
  for (int k : ks) {
    auto spec = engine.NewSequence(true);
    logits = Step(engine, spec.get(), prompt);
    std::vector<int32_t> out = {Argmax(logits.data() + (prompt.size() - 1) * vocab, vocab)};
    int accepted = 0, drafted = 0;
    while (static_cast<int>(out.size()) < total) {
      DraftRequest d{spec.get(), out.back(), k};
      auto drafts = engine.Draft({&d, 1});
      ASSERT_TRUE(drafts.ok());
      ASSERT_EQ((*drafts)[0].size(), static_cast<size_t>(k));
      std::vector<int32_t> chunk = {out.back()};
      chunk.insert(chunk.end(), (*drafts)[0].begin(), (*drafts)[0].end());
      UndoLog log;
      logits = Step(engine, spec.get(), chunk, &log);
      int a = 0;
      int32_t next = Argmax(logits.data(), vocab);
      while (a < k && next == chunk[static_cast<size_t>(a + 1)]) {
        ++a;
        out.push_back(next);
        next = Argmax(logits.data() + a * vocab, vocab);
      }
      out.push_back(next);
      drafted += k;
      accepted += a;
      ASSERT_TRUE(engine.Rollback(spec.get(), log, a + 1).ok());
    }
    out.resize(total);
    EXPECT_EQ(out, expected) << "K " << k;
    EXPECT_GT(drafted, 0);
    // Same tokens forwarded: the states agree once both have read the same prefix.
    auto replay = engine.NewSequence(true);
    std::vector<int32_t> read = prompt;
    read.insert(read.end(), expected.begin(), expected.begin() + (spec->position() - static_cast<int64_t>(prompt.size())));
    Step(engine, replay.get(), read);
    EXPECT_EQ(StateDifference(*spec, *replay), "") << "K " << k << " accepted " << accepted << " of " << drafted;
  }
}

TEST(DraftMtp, GreedySpeculationEmitsThePlainTokens) { CheckGreedySpeculation(testing::TestModel(), {1, 3, 7}); }
TEST(DraftDspark, GreedySpeculationEmitsThePlainTokens) { CheckGreedySpeculation(testing::TestModelDspark(), {1, 3, 5}); }

// MTP layers added to a state without them start fresh at its position and draft after the
// next forward; taken away, the state equals one that never had them. The trunk is untouched.
TEST(SetMtp, AddsFreshLayersOrDropsThem) {
  const Model& model = testing::TestModel();
  Engine engine(model, EngineOptions{});
  const std::vector<int32_t> tokens = RandomTokens(60, 31);
  auto plain = engine.NewSequence(false), with = engine.NewSequence(true);
  Step(engine, plain.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + 50));
  Step(engine, with.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + 50));
  auto dropped = with->Clone();
  dropped->SetMtp(false, model.config(), model.plan());
  EXPECT_EQ(StateDifference(*dropped, *plain), "");
  auto added = plain->Clone();
  added->SetMtp(true, model.config(), model.plan());
  ASSERT_TRUE(added->with_mtp());
  EXPECT_EQ(added->mtp_position(), 50);
  EXPECT_TRUE(added->pending_hidden().empty());
  const std::vector<int32_t> next(tokens.begin() + 50, tokens.end());
  EXPECT_TRUE(Same(Step(engine, added.get(), next), Step(engine, plain.get(), next)));
  DraftRequest d{added.get(), 5, 2};
  EXPECT_TRUE(engine.DraftMtp({&d, 1}).ok());
}

}  // namespace
}  // namespace flashserve::engine
