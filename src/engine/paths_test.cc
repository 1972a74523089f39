// The optimized kernels against the naive reference path on a whole forward pass, BF16 dot
// products against the f32 paths, the MTP module's chunk invariance, the indexer's skip for
// short contexts, and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "base/huge_pages.h"
#include "engine/test_model.h"
#include "kernels/gemm/matmul.h"

namespace flashserve::engine {
namespace {

using testing::BitEqual;
using testing::MinRowCosine;
using testing::RandomTokens;
using testing::RunChunked;
using testing::TestModel;

TEST(PathsTest, OptimizedKernelsMatchTheReferencePath) {
  for (bool bf16 : {false, true}) {
    EngineOptions fast, ref;
    fast.qat = ref.qat = false;  // QAT rounding would amplify last-bit differences
    ref.reference_kernels = true;
    Engine a(TestModel(bf16), fast), b(TestModel(bf16), ref);
    std::vector<int32_t> tokens = RandomTokens(133, 77);
    auto sa = a.NewSequence(), sb = b.NewSequence();
    std::vector<float> la = RunChunked(a, sa.get(), tokens, {133});
    std::vector<float> lb = RunChunked(b, sb.get(), tokens, {100, 1, 32});
    EXPECT_GT(MinRowCosine(la, lb, 1280), 0.99999) << (bf16 ? "bf16" : "fp8");
  }
}

// The tiny preset (vocab 1280) loaded with two sets of options.
std::pair<std::unique_ptr<Model>, std::unique_ptr<Model>> LoadTwice(const ModelLoadOptions& a,
                                                                    const ModelLoadOptions& b) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("fs_engine_load_" + std::to_string(getpid()));
  model::ModelConfig c = model::TinyPreset();
  c.vocab_size = 1280;
  base::ThreadPool pool(2);
  EXPECT_TRUE(model::WriteRandomCheckpoint(c, dir, model::RandomCheckpointOptions{}, pool).ok());
  auto ma = Model::Load(dir, a);
  auto mb = Model::Load(dir, b);
  std::filesystem::remove_all(dir);
  if (!ma.ok() || !mb.ok()) return {};
  return {std::move(ma).value(), std::move(mb).value()};
}

// Logits of 40 tokens on two models, one-shot on the first and in chunks on the second, equal.
bool SameLogits(const Model& a, const Model& b, uint64_t seed, const std::vector<int>& chunks) {
  Engine ea(a, EngineOptions{}), eb(b, EngineOptions{});
  std::vector<int32_t> tokens = RandomTokens(40, seed);
  auto sa = ea.NewSequence(), sb = eb.NewSequence();
  return BitEqual(RunChunked(ea, sa.get(), tokens, {40}), RunChunked(eb, sb.get(), tokens, chunks));
}

// The output head read from its huge-page copy or from the checkpoint mapping: the same bytes,
// so the same logits.
TEST(PathsTest, HeadInHugePagesGivesTheSameLogits) {
  ModelLoadOptions off, on;
  off.head_in_huge_pages = false;
  on.head_in_huge_pages = true;
  auto [plain, huge] = LoadTwice(off, on);
  ASSERT_TRUE(plain && huge);
  EXPECT_FALSE(plain->head_in_huge_pages());
  if (!base::TransparentHugePagesAvailable()) {
    EXPECT_FALSE(huge->head_in_huge_pages());
  }
  const model::Matrix& a = plain->weights().head;
  const model::Matrix& b = huge->weights().head;
  EXPECT_EQ(huge->head_in_huge_pages(), a.data != b.data);
  EXPECT_EQ(0, std::memcmp(a.data, b.data, static_cast<size_t>(a.rows * a.RowBytes())));
  EXPECT_TRUE(SameLogits(*plain, *huge, 5, {7, 33}));
}

// FP4 experts repacked into the lane-pair layout (where the AVX-512 kernels are in use) or read
// from the checkpoint mapping: the same logits, one-shot and in chunks.
TEST(PathsTest, Fp4LanePairExpertsGiveTheSameLogits) {
  ModelLoadOptions off, on;
  off.fp4_lane_pairs = false;
  on.fp4_lane_pairs = true;
  auto [plain, packed] = LoadTwice(off, on);
  ASSERT_TRUE(plain && packed);
  EXPECT_FALSE(plain->fp4_lane_pairs());
  EXPECT_EQ(packed->fp4_lane_pairs(), kernels::PrefersFp4LanePairs());
  const model::Matrix& a = plain->layer(0).moe.experts[0].w1;
  const model::Matrix& b = packed->layer(0).moe.experts[0].w1;
  ASSERT_EQ(a.format, model::MatrixFormat::kFp4);
  EXPECT_EQ(a.fp4_layout, model::Fp4Layout::kCheckpoint);
  EXPECT_EQ(b.fp4_layout, packed->fp4_lane_pairs() ? model::Fp4Layout::kLanePairs : model::Fp4Layout::kCheckpoint);
  EXPECT_TRUE(SameLogits(*plain, *packed, 6, {7, 1, 32}));
}

// With QAT on, the head's input is BF16 (as REF casts it), so the BF16 head may take BF16 dot
// products (where the CPU has AVX512-BF16): a speed choice that leaves every logit's bits as
// the f32 path's, one-shot and in chunks. The head's exponent range is recorded at load.
TEST(PathsTest, Bf16DotProductsGiveTheSameLogits) {
  auto loaded = LoadTwice(ModelLoadOptions{}, ModelLoadOptions{});
  const auto& model = loaded.first;  // not a structured binding: the lambda below captures it
  ASSERT_TRUE(model);
  const model::Matrix& head = model->weights().head;
  ASSERT_EQ(head.format, model::MatrixFormat::kBF16);
  EXPECT_GE(head.exp_lo, 1);
  EXPECT_LE(head.exp_hi, 254);
  EXPECT_LE(head.exp_lo, head.exp_hi);
  std::vector<int32_t> tokens = RandomTokens(40, 9);
  const auto logits = [&](kernels::Bf16Dots dots, const std::vector<int>& chunks) {
    kernels::SetBf16Dots(dots);
    Engine engine(*model, EngineOptions{});
    auto state = engine.NewSequence();
    return RunChunked(engine, state.get(), tokens, chunks);
  };
  const std::vector<float> on = logits(kernels::Bf16Dots::kOn, {40});
  const std::vector<float> off = logits(kernels::Bf16Dots::kOff, {40});
  const std::vector<float> on_chunked = logits(kernels::Bf16Dots::kOn, {7, 1, 32});
  kernels::SetBf16Dots(kernels::Bf16Dots::kAuto);
  EXPECT_TRUE(BitEqual(on, off));
  EXPECT_TRUE(BitEqual(on, on_chunked));
}

// A token that sees no more compressed entries than the indexer's top-k takes them all, so its
// step skips the indexer's query projections; one that sees more runs them. The two decode
// steps read the same weights otherwise (each token routes to the same number of experts).
TEST(PathsTest, ShortSequencesSkipTheIndexerQueryProjections) {
  Engine engine(TestModel(), EngineOptions{});
  const int topk = engine.model().config().index_topk;
  const double queries = testing::IndexerQueryBytes(engine.model());
  ASSERT_GT(queries, 0);
  // Positions 4 top-k - 1 (top-k entries: all taken) and 4 top-k + 20 (top-k + 5: scored).
  EXPECT_DOUBLE_EQ(testing::DecodeStepWeightBytes(engine, 4 * topk + 20, 21) -
                       testing::DecodeStepWeightBytes(engine, 4 * topk - 1, 21),
                   queries);
}

// Profiling files every FLOP and byte of a forward pass under a phase (the phase floors of
// bench-forward add up to the whole step's work), and the products land where they belong.
TEST(PathsTest, ProfiledWorkAddsUpOverThePhases) {
  EngineOptions options;
  options.profile = true;
  Engine engine(TestModel(), options);
  auto state = engine.NewSequence(/*with_mtp=*/true);
  const std::vector<int32_t> tokens = RandomTokens(41, 5);
  // A prefill of 40 tokens, then one decode step; both with the MTP head.
  for (auto [begin, count] : {std::pair<size_t, size_t>{0, 40}, {40, 1}}) {
    ForwardRequest req{state.get(), std::span<const int32_t>(tokens.data() + begin, count), LogitsMode::kLast, true};
    ASSERT_TRUE(engine.Forward({&req, 1}).ok());
    const OpStats& s = engine.last_stats();
    double flops = 0, bytes = 0;
    for (size_t p = 0; p < OpStats::kPhases; ++p) {
      flops += s.phase_flops[p];
      bytes += s.phase_bytes[p];
    }
    EXPECT_EQ(s.phase_flops[OpStats::kPhases], 0.0) << "work outside every phase, " << count << " tokens";
    EXPECT_EQ(s.phase_bytes[OpStats::kPhases], 0.0) << count;
    EXPECT_NEAR(flops, s.flops, 1e-9 * s.flops) << count;
    EXPECT_NEAR(bytes, s.weight_bytes + s.state_bytes, 1e-9 * bytes) << count;
    const model::ModelWeights& w = engine.model().weights();  // hc_head's mix, then the head
    EXPECT_EQ(s.phase_bytes[static_cast<size_t>(Phase::kHead)],
              static_cast<double>(w.head.StoredBytes() + w.hc_head.fn.size() * sizeof(float))) << count;
    EXPECT_GT(s.phase_flops[static_cast<size_t>(Phase::kExperts)], 0.0) << count;
    EXPECT_GT(s.phase_bytes[static_cast<size_t>(Phase::kAttend)], 0.0) << count;  // keys read
    EXPECT_GT(s.phase_flops[static_cast<size_t>(Phase::kMtp)], 0.0) << count;
  }
}

// The products of one engine's prefill of 40 tokens, decode step and decode batch of two (with
// MTP where the model has it) whose rows start off a cache line.
void ExpectEveryProductAligned(const Model& model, bool qat) {
  EngineOptions options;
  options.qat = qat;
  Engine engine(model, options);
  const std::string what = std::string(model.config().is_v41() ? "V4.1" : "V4") + (qat ? ", QAT" : ", no QAT");
  auto a = engine.NewSequence(/*with_mtp=*/true), b = engine.NewSequence(/*with_mtp=*/true);
  const std::vector<int32_t> tokens = RandomTokens(42, 6);
  for (auto* state : {a.get(), b.get()}) {
    ForwardRequest req{state, std::span<const int32_t>(tokens.data(), 40), LogitsMode::kLast, state->with_mtp()};
    const auto done = engine.Forward({&req, 1});
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_EQ(engine.last_stats().unaligned_products, 0) << "prefill, " << what;
  }
  const bool mtp = a->with_mtp();  // tiny-v41 with Engram has no MTP layer
  ForwardRequest steps[2] = {{a.get(), std::span<const int32_t>(tokens.data() + 40, 1), LogitsMode::kLast, mtp},
                             {b.get(), std::span<const int32_t>(tokens.data() + 41, 1), LogitsMode::kLast, mtp}};
  for (size_t n : {size_t{1}, size_t{2}}) {
    ASSERT_TRUE(engine.Forward({steps + 2 - n, n}).ok());
    EXPECT_GT(engine.last_stats().flops, 0.0);
    EXPECT_EQ(engine.last_stats().unaligned_products, 0) << "decode batch " << n << ", " << what;
  }
}

// Every matrix product of a forward pass gets activation rows on cache lines (the engine's
// buffers are base::AlignedVector; docs/benchmarks.md has what rows off a line cost). QAT off,
// the products read the engine's own buffers rather than Linear's rounded copies.
TEST(PathsTest, EveryProductReadsActivationsFromCacheLines) {
  for (const bool qat : {true, false}) {
    ExpectEveryProductAligned(TestModel(), qat);
    ExpectEveryProductAligned(testing::TestModelV41(), qat);
    ExpectEveryProductAligned(testing::TestModelV41Engram(), qat);
  }
}

TEST(PathsTest, MtpLogitsDoNotDependOnChunking) {
  Engine engine(TestModel(), EngineOptions{});
  std::vector<int32_t> tokens = RandomTokens(150, 21);
  auto run = [&](std::vector<int> chunks) {
    auto state = engine.NewSequence(/*with_mtp=*/true);
    std::vector<float> mtp;
    size_t done = 0, c = 0;
    while (done < tokens.size()) {
      size_t n = std::min<size_t>(static_cast<size_t>(chunks[c++ % chunks.size()]), tokens.size() - done);
      ForwardRequest req{state.get(), std::span<const int32_t>(tokens.data() + done, n), LogitsMode::kLast, true};
      auto r = engine.Forward({&req, 1});
      EXPECT_TRUE(r.ok());
      mtp.insert(mtp.end(), r->mtp_logits.begin(), r->mtp_logits.end());
      done += n;
    }
    return mtp;
  };
  std::vector<float> one = run({150});
  ASSERT_EQ(one.size(), 149u * 1280);  // positions 0..148 know their next token
  EXPECT_TRUE(BitEqual(one, run({1})));
  EXPECT_TRUE(BitEqual(one, run({3, 130, 5})));
  // The MTP head predicts a different distribution than the trunk.
  auto s = engine.NewSequence();
  std::vector<float> trunk = RunChunked(engine, s.get(), tokens, {150});
  EXPECT_LT(MinRowCosine(std::vector<float>(one.begin(), one.begin() + 1280),
                         std::vector<float>(trunk.begin(), trunk.begin() + 1280), 1280), 0.99);
  for (float v : one) ASSERT_TRUE(std::isfinite(v));
}

// A recycled result's storage is filled by the next call without being cleared: the logits
// (trunk and MTP) equal a fresh engine's, whether the next call has more rows than the buffer
// held (grown) or fewer (stale rows past the end), and the storage is the recycled one (its
// capacity never falls).
TEST(PathsTest, RecycledLogitsBuffersGiveTheSameLogits) {
  const std::vector<int32_t> tokens = RandomTokens(90, 23);
  auto run = [&](Engine& engine, bool recycle) {
    auto state = engine.NewSequence(/*with_mtp=*/true);
    std::vector<float> all;
    size_t most_capacity = 0, most_mtp_capacity = 0;  // of the results so far: a recycled one keeps its size
    size_t done = 0;
    for (size_t n : {40, 7, 30, 1, 12}) {  // kAll: 40 rows, then fewer, then more, ...
      ForwardRequest req{state.get(), std::span<const int32_t>(tokens.data() + done, n), LogitsMode::kAll, true};
      auto r = engine.Forward({&req, 1});
      EXPECT_TRUE(r.ok());
      if (!r.ok()) return all;
      if (recycle) {
        EXPECT_GE(r->logits.capacity(), most_capacity);
        EXPECT_GE(r->mtp_logits.capacity(), most_mtp_capacity);
      }
      most_capacity = std::max(most_capacity, r->logits.capacity());
      most_mtp_capacity = std::max(most_mtp_capacity, r->mtp_logits.capacity());
      all.insert(all.end(), r->logits.begin(), r->logits.end());
      all.insert(all.end(), r->mtp_logits.begin(), r->mtp_logits.end());
      if (recycle) engine.Recycle(std::move(*r));
      done += n;
    }
    return all;
  };
  Engine fresh(TestModel(), EngineOptions{}), recycling(TestModel(), EngineOptions{});
  const std::vector<float> expected = run(fresh, false);
  ASSERT_EQ(expected.size(), (90u + 89u) * 1280);
  EXPECT_TRUE(BitEqual(expected, run(recycling, true)));
  EXPECT_TRUE(BitEqual(expected, run(recycling, true)));  // buffers from the first run's end
}

TEST(PathsTest, InvalidRequestsAreErrorsAndLeaveStateUntouched) {
  Engine engine(TestModel(), EngineOptions{});
  auto state = engine.NewSequence();
  std::vector<int32_t> bad = {5, 1280};
  ForwardRequest r1{state.get(), bad};
  EXPECT_EQ(engine.Forward({&r1, 1}).error().code(), base::ErrorCode::kInvalidArgument);
  ForwardRequest r2{state.get(), {}};
  EXPECT_EQ(engine.Forward({&r2, 1}).error().code(), base::ErrorCode::kInvalidArgument);
  std::vector<int32_t> ok = {5, 6};
  ForwardRequest twice[2] = {{state.get(), ok}, {state.get(), ok}};
  EXPECT_EQ(engine.Forward(twice).error().code(), base::ErrorCode::kInvalidArgument);
  ForwardRequest mtp{state.get(), ok, LogitsMode::kLast, true};
  EXPECT_EQ(engine.Forward({&mtp, 1}).error().code(), base::ErrorCode::kFailedPrecondition);
  std::vector<int32_t> huge(8193, 7);
  ForwardRequest r3{state.get(), huge};
  EXPECT_EQ(engine.Forward({&r3, 1}).error().code(), base::ErrorCode::kContextOverflow);
  EXPECT_EQ(state->position(), 0);
  ForwardRequest good{state.get(), ok};
  EXPECT_TRUE(engine.Forward({&good, 1}).ok());
  EXPECT_EQ(state->position(), 2);
}

}  // namespace
}  // namespace flashserve::engine
