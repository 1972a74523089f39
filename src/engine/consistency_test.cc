// Consistency of the stateful engine: one-shot prefill, chunked prefill with awkward chunks and
// token-by-token decode give bit-identical logits at every position (the sequence lengths of
// v4-architecture.md section 11), and a sequence batched with others equals it alone.
#include <gtest/gtest.h>

#include "engine/test_model.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;
using testing::RandomTokens;
using testing::RunChunked;
using testing::TestModel;

class ConsistencyTest : public ::testing::TestWithParam<bool> {};  // param: QAT on

TEST_P(ConsistencyTest, ChunkingNeverChangesLogits) {
  EngineOptions opt;
  opt.qat = GetParam();
  Engine engine(TestModel(), opt);
  // v4-architecture.md section 11: no entry yet, first CSA entry, first overlapped entry,
  // indexer pruning, window full + first HCA entry, second HCA entry, several HCA entries.
  std::vector<int> lengths = {1, 2, 3, 4, 5, 8, 67, 70, 127, 128, 129, 255, 256, 257, 600};
  if (!GetParam()) lengths = {3, 5, 8, 70, 129, 257};  // QAT off: the structurally distinct cases
  for (int len : lengths) {
    std::vector<int32_t> tokens = RandomTokens(len, 100 + len);
    auto one_shot_state = engine.NewSequence();
    std::vector<float> one_shot = RunChunked(engine, one_shot_state.get(), tokens, {len});
    ASSERT_EQ(one_shot.size(), static_cast<size_t>(len) * 1280);
    std::vector<std::vector<int>> schedules = {{1}, {3}, {5, 7}, {130}, {7, 1, 128, 3}};
    if (len > 300) schedules = {{1}, {130}, {5, 257, 3}};
    for (const auto& chunks : schedules) {
      auto state = engine.NewSequence();
      std::vector<float> chunked = RunChunked(engine, state.get(), tokens, chunks);
      EXPECT_TRUE(BitEqual(one_shot, chunked)) << "length " << len << " first chunk " << chunks[0];
      EXPECT_EQ(state->position(), len);
    }
  }
}

TEST_P(ConsistencyTest, BatchedSequencesEqualTheirSoloRuns) {
  EngineOptions opt;
  opt.qat = GetParam();
  Engine engine(TestModel(), opt);
  // Sequences at different positions, some prefilling, some decoding, in one call.
  std::vector<bool> equal = testing::BatchedEqualsSolo(engine, {0, 3, 126, 130, 255, 40}, {5, 1, 4, 1, 2, 60}, 7);
  for (size_t i = 0; i < equal.size(); ++i) EXPECT_TRUE(equal[i]) << "sequence " << i;
}

TEST_P(ConsistencyTest, ThreadCountDoesNotChangeLogits) {
  std::vector<int32_t> tokens = RandomTokens(140, 3);
  std::vector<float> base;
  for (int threads : {1, 2, 3}) {
    EngineOptions opt;
    opt.qat = GetParam();
    opt.num_threads = threads;
    Engine engine(TestModel(), opt);
    auto state = engine.NewSequence();
    std::vector<float> logits = RunChunked(engine, state.get(), tokens, {140});
    if (base.empty()) base = logits;
    EXPECT_TRUE(BitEqual(base, logits)) << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Qat, ConsistencyTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "QatOn" : "QatOff"; });

}  // namespace
}  // namespace flashserve::engine
