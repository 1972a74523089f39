// DeepSeek-V4.1 on the engine (v4-architecture.md section 5): the tiny-v41 model's logits do
// not depend on chunking, batching, thread count or a snapshot/resume, the optimized kernels
// match the reference path, the layer roles share state as specified (only KV sources grow),
// and the stored state uses V4.1's FP4 / FP8 cache formats (890 B/token for V4.1-Flash).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/entry_codec.h"
#include "engine/state_codec.h"
#include "engine/test_model.h"
#include "model/presets.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;
using testing::MinRowCosine;
using testing::RandomTokens;
using testing::RunChunked;
using testing::TestModelV41;

constexpr int kVocab = 1280;

class V41Test : public ::testing::TestWithParam<bool> {};  // param: QAT on

TEST_P(V41Test, ChunkingNeverChangesLogits) {
  EngineOptions opt;
  opt.qat = GetParam();
  Engine engine(TestModelV41(), opt);
  // No entry yet, first ratio-2 entry, top-k pruning on ratio-1 (17+) and ratio-2 (33+) layers,
  // candidate blocks pruning (33+ ratio-1 entries), window full, long sequences.
  std::vector<int> lengths = {1, 2, 3, 4, 17, 18, 34, 67, 129, 260};
  if (!GetParam()) lengths = {3, 34, 129};
  for (int len : lengths) {
    std::vector<int32_t> tokens = RandomTokens(len, 300 + len);
    auto one_shot_state = engine.NewSequence();
    std::vector<float> one_shot = RunChunked(engine, one_shot_state.get(), tokens, {len});
    ASSERT_EQ(one_shot.size(), static_cast<size_t>(len) * kVocab);
    for (const auto& chunks : std::vector<std::vector<int>>{{1}, {3}, {5, 7}, {130}, {7, 1, 128, 3}}) {
      auto state = engine.NewSequence();
      EXPECT_TRUE(BitEqual(one_shot, RunChunked(engine, state.get(), tokens, chunks)))
          << "length " << len << " first chunk " << chunks[0];
    }
    for (float v : one_shot) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST_P(V41Test, BatchedSequencesEqualTheirSoloRuns) {
  EngineOptions opt;
  opt.qat = GetParam();
  Engine engine(TestModelV41(), opt);
  std::vector<bool> equal = testing::BatchedEqualsSolo(engine, {0, 3, 126, 40, 33}, {5, 1, 4, 60, 1}, 17);
  for (size_t i = 0; i < equal.size(); ++i) EXPECT_TRUE(equal[i]) << "sequence " << i;
}

TEST_P(V41Test, ResumeFromBytesMatchesUninterruptedRun) {
  EngineOptions opt;
  opt.qat = GetParam();
  const Model& model = TestModelV41();
  Engine engine(model, opt);
  const int total = 280;
  std::vector<int32_t> tokens = RandomTokens(total, 44);
  auto full_state = engine.NewSequence();
  std::vector<float> full = RunChunked(engine, full_state.get(), tokens, {total});
  for (int p : {1, 3, 128, 131, 256}) {
    auto state = engine.NewSequence();
    std::vector<int32_t> head(tokens.begin(), tokens.begin() + p), tail(tokens.begin() + p, tokens.end());
    RunChunked(engine, state.get(), head, {p});
    // As the KV store holds it: full 128-token blocks plus the boundary.
    std::vector<std::string> blocks;
    for (int64_t b = 0; b < p / kBlockTokens; ++b) blocks.push_back(SerializeBlock(*state, model.config(), model.plan(), b));
    std::string boundary = SerializeBoundary(*state, model.config(), model.plan());
    std::vector<std::string_view> views(blocks.begin(), blocks.end());
    auto restored = AssembleState(boundary, views, model.config(), model.plan());
    ASSERT_TRUE(restored.ok()) << restored.error().ToString();
    std::vector<float> expected(full.begin() + static_cast<int64_t>(p) * kVocab, full.end());
    EXPECT_TRUE(BitEqual(expected, RunChunked(engine, restored->get(), tail, {5, 1}))) << "resume at " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Qat, V41Test, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "QatOn" : "QatOff"; });

TEST(V41PathsTest, OptimizedKernelsMatchTheReferencePath) {
  for (bool bf16 : {false, true}) {
    EngineOptions fast, ref;
    fast.qat = ref.qat = false;
    ref.reference_kernels = true;
    Engine a(TestModelV41(bf16), fast), b(TestModelV41(bf16), ref);
    std::vector<int32_t> tokens = RandomTokens(70, 91);
    auto sa = a.NewSequence(), sb = b.NewSequence();
    std::vector<float> la = RunChunked(a, sa.get(), tokens, {70});
    std::vector<float> lb = RunChunked(b, sb.get(), tokens, {40, 1, 29});
    EXPECT_GT(MinRowCosine(la, lb), 0.99999) << (bf16 ? "bf16" : "fp8");
  }
}

TEST(V41PathsTest, ThreadCountDoesNotChangeLogits) {
  std::vector<int32_t> tokens = RandomTokens(90, 5);
  std::vector<float> base;
  for (int threads : {1, 2, 3}) {
    EngineOptions opt;
    opt.num_threads = threads;
    Engine engine(TestModelV41(), opt);
    auto state = engine.NewSequence();
    std::vector<float> logits = RunChunked(engine, state.get(), tokens, {90});
    if (base.empty()) base = logits;
    EXPECT_TRUE(BitEqual(base, logits)) << threads << " threads";
  }
}

// Same weights (generation is seeded by tensor name), different selection limits: logits are
// equal while nothing is pruned and differ once the top-k / candidate blocks bite.
TEST(V41PathsTest, TopKAndCandidateBlocksPruneOnlyLongContexts) {
  model::ModelConfig narrow = testing::TinyV41NoEngram();
  narrow.candidate_topk_blocks = 2;  // 16 entries of the ratio-1 source
  auto narrow_model = testing::WriteAndLoad(narrow, false, "_v41_narrow");
  model::ModelConfig wide = testing::TinyV41NoEngram();
  wide.candidate_topk_blocks = 1000;
  wide.index_topk = 1000;
  auto wide_model = testing::WriteAndLoad(wide, false, "_v41_wide");
  Engine base(TestModelV41(), EngineOptions{}), a(*narrow_model, EngineOptions{}), b(*wide_model, EngineOptions{});
  std::vector<int32_t> tokens = RandomTokens(120, 12);
  auto run = [&](Engine& e) {
    auto st = e.NewSequence();
    return RunChunked(e, st.get(), tokens, {120});
  };
  std::vector<float> lb = run(base), la = run(a), lw = run(b);
  auto rows = [](const std::vector<float>& v, int64_t from, int64_t to) {
    return std::vector<float>(v.begin() + from * kVocab, v.begin() + to * kVocab);
  };
  // Positions 0..15: at most 16 ratio-1 entries (2 blocks), all kept by every variant.
  EXPECT_TRUE(BitEqual(rows(lb, 0, 16), rows(la, 0, 16)));
  EXPECT_TRUE(BitEqual(rows(lb, 0, 16), rows(lw, 0, 16)));
  // Later positions: the candidate blocks (narrow) and the top-16 (preset vs wide) change them.
  EXPECT_FALSE(BitEqual(rows(lb, 100, 120), rows(la, 100, 120)));
  EXPECT_FALSE(BitEqual(rows(lb, 100, 120), rows(lw, 100, 120)));
}

// A decode step whose every index source still takes all its entries (no top-k, no candidate
// blocks to choose or prune) skips the indexers' query projections; a long context runs them.
// Both steps are at odd positions, so the ratio-2 and ratio-1 sources both finish an entry.
TEST(V41PathsTest, ShortContextsSkipTheIndexerQueryProjections) {
  Engine engine(TestModelV41(), EngineOptions{});
  const double queries = testing::IndexerQueryBytes(engine.model());
  ASSERT_GT(queries, 0);
  // Position 5: at most 6 entries per source; position 201: 101 / 202 entries, past the top-16.
  EXPECT_DOUBLE_EQ(testing::DecodeStepWeightBytes(engine, 201, 22) - testing::DecodeStepWeightBytes(engine, 5, 22),
                   queries);
}

// Engram (layer 1 of the spec's tiny config): chunking, batching and resume from bytes keep
// the logits, the look-back crosses chunk and snapshot boundaries, and the lookup matters.
TEST(V41EngramTest, LookBackSurvivesChunkingBatchingAndResume) {
  const Model& model = testing::TestModelV41Engram();
  Engine engine(model, EngineOptions{});
  std::vector<int32_t> tokens = RandomTokens(140, 61);
  auto one = engine.NewSequence();
  std::vector<float> full = RunChunked(engine, one.get(), tokens, {140});
  EXPECT_EQ(one->recent_tokens(), std::vector<int32_t>(tokens.end() - 3, tokens.end()));
  for (const auto& chunks : std::vector<std::vector<int>>{{1}, {2, 5}, {130, 3}}) {
    auto st = engine.NewSequence();
    EXPECT_TRUE(BitEqual(full, RunChunked(engine, st.get(), tokens, chunks))) << "chunk " << chunks[0];
  }
  for (int p : {1, 2, 129}) {
    auto st = engine.NewSequence();
    RunChunked(engine, st.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + p), {p});
    auto restored = DeserializeState(SerializeState(*st, model.config(), model.plan()), model.config(), model.plan());
    ASSERT_TRUE(restored.ok()) << restored.error().ToString();
    std::vector<float> expected(full.begin() + static_cast<int64_t>(p) * kVocab, full.end());
    EXPECT_TRUE(BitEqual(expected, RunChunked(engine, restored->get(), std::vector<int32_t>(tokens.begin() + p, tokens.end()),
                                              {4}))) << "resume at " << p;
  }
  std::vector<bool> equal = testing::BatchedEqualsSolo(engine, {0, 2, 40}, {3, 1, 20}, 5);
  for (size_t i = 0; i < equal.size(); ++i) EXPECT_TRUE(equal[i]) << "sequence " << i;
  // The same trunk weights without the Engram layer give other logits from the first token on.
  Engine plain(TestModelV41(), EngineOptions{});
  auto st = plain.NewSequence();
  std::vector<float> without = RunChunked(plain, st.get(), std::vector<int32_t>(tokens.begin(), tokens.begin() + 4), {4});
  EXPECT_FALSE(BitEqual(std::vector<float>(full.begin(), full.begin() + 4 * kVocab), without));
  // A different token 3 positions back changes the 4-gram, hence the logits at position 5.
  std::vector<int32_t> other = tokens;
  other[2] = other[2] == 7 ? 8 : 7;
  auto so = engine.NewSequence();
  std::vector<float> changed = RunChunked(engine, so.get(), std::vector<int32_t>(other.begin(), other.begin() + 6), {6});
  EXPECT_TRUE(BitEqual(std::vector<float>(full.begin(), full.begin() + 2 * kVocab),
                       std::vector<float>(changed.begin(), changed.begin() + 2 * kVocab)));
  EXPECT_FALSE(BitEqual(std::vector<float>(full.begin() + 5 * kVocab, full.begin() + 6 * kVocab),
                        std::vector<float>(changed.begin() + 5 * kVocab, changed.begin() + 6 * kVocab)));
}

TEST(V41EngramTest, ModelWithoutTokenMapRefusesToRun) {
  auto m = testing::WriteAndLoad(testing::TinyV41EngramConfig(), false, "_v41_engram_nomap");
  EXPECT_TRUE(m->needs_engram_token_map());
  Engine engine(*m, EngineOptions{});
  auto st = engine.NewSequence();
  std::vector<int32_t> ids = {5, 6};
  ForwardRequest req{st.get(), ids};
  auto r = engine.Forward({&req, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), base::ErrorCode::kFailedPrecondition);
  EXPECT_NE(r.error().message().find("Engram"), std::string::npos);
  std::vector<int32_t> map(1280, 0);
  EXPECT_EQ(m->SetEngramTokenMap(map, 999).error().code(), base::ErrorCode::kBadTokenizer);  // wrong class count
  EXPECT_EQ(m->SetEngramTokenMap(std::vector<int32_t>(2, 0), 1000).error().code(),  // misses the pad id 2
            base::ErrorCode::kBadTokenizer);
  map[7] = 1000;  // a class outside [0, classes)
  EXPECT_EQ(m->SetEngramTokenMap(map, 1000).error().code(), base::ErrorCode::kBadTokenizer);
  EXPECT_TRUE(m->needs_engram_token_map());
  EXPECT_EQ(st->position(), 0);
  // A state with the Engram look-back does not resume on the same trunk without Engram layers.
  const Model& with = testing::TestModelV41Engram();
  Engine e2(with, EngineOptions{});
  auto s2 = e2.NewSequence();
  RunChunked(e2, s2.get(), RandomTokens(5, 3), {5});
  const Model& without = TestModelV41();
  auto foreign = DeserializeState(SerializeState(*s2, with.config(), with.plan()), without.config(), without.plan());
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.error().code(), base::ErrorCode::kBadState);
}

TEST(V41StateTest, OnlyKvSourcesGrowAndEntriesAreOnTheirQatGrids) {
  const Model& model = TestModelV41();
  Engine engine(model, EngineOptions{});
  auto state = engine.NewSequence();
  RunChunked(engine, state.get(), RandomTokens(131, 8), {131});
  // tiny-v41: ratios {0,0,2,2,1,1,1,1}, KV sources 2 (ratio 2) and 4 (ratio 1).
  for (int l = 0; l < state->num_layers(); ++l) {
    const LayerState& ls = state->layer(l);
    const int64_t expected = l == 2 ? 131 / 2 : l == 4 ? 131 : 0;
    EXPECT_EQ(ls.num_entries(), expected) << "layer " << l;
    EXPECT_EQ(static_cast<int64_t>(ls.index_keys.size()), expected * 128) << "layer " << l;
  }
  // QAT on: the entries and keys encode losslessly in 288 / 68 bytes, the raw ring in 528.
  std::string out;
  const LayerState& src = state->layer(4);
  EXPECT_TRUE(EncodeEntries(EntryEncoding::kFp4E4m3, src.compressed.data(), src.num_entries(), 512, 512, &out));
  EXPECT_EQ(out.size(), static_cast<size_t>(src.num_entries() * 288));
  out.clear();
  EXPECT_TRUE(EncodeEntries(EntryEncoding::kFp4, src.index_keys.data(), src.num_entries(), 128, 0, &out));
  EXPECT_EQ(out.size(), static_cast<size_t>(src.num_entries() * 68));
  out.clear();
  EXPECT_TRUE(EncodeEntries(EntryEncoding::kFp8Block32, state->layer(0).ring.data(), 100, 512, 512, &out));
  EXPECT_EQ(out.size(), 100u * 528);
  // A block of 128 tokens stores 64 ratio-2 and 128 ratio-1 entries with their keys.
  std::string block = SerializeBlock(*state, model.config(), model.plan(), 0);
  const int64_t payload = (64 + 128) * (288 + 68);
  EXPECT_GE(static_cast<int64_t>(block.size()), payload);
  EXPECT_LT(static_cast<int64_t>(block.size()), payload + 200);
}

TEST(V41StateTest, FlashShapedStateStores890BytesPerToken) {
  // V4.1-Flash's layer roles: KV sources 2, 8, 14 at ratio 2 and 20 at ratio 1.
  model::ModelConfig c = model::TinyV41Preset();
  c.num_layers = 40;
  c.compress_ratios.assign(40, 0);
  for (int l = 2; l < 20; ++l) c.compress_ratios[l] = 2;
  for (int l = 20; l < 40; ++l) c.compress_ratios[l] = 1;
  c.kv_source_layers = {2, 8, 14, 20};
  c.index_source_layers = {2, 8, 14, 20, 24, 28, 32, 36};
  c.candidate_source_layer = 20;
  ASSERT_TRUE(model::ValidateModelConfig(c).ok());
  double per_token = 0;
  for (const model::LayerSpec& s : model::BuildLayerPlan(c)) {
    if (!s.owns_compressor) continue;
    per_token += static_cast<double>(EncodedEntryBytes(EntryEncoding::kFp4E4m3, 512, 512) +
                                     EncodedEntryBytes(EntryEncoding::kFp4, 128, 0)) / s.compress_ratio;
  }
  EXPECT_DOUBLE_EQ(per_token, 890.0);
}

}  // namespace
}  // namespace flashserve::engine
