// Compares the engine with the independent reference logits in ../shared/golden/tiny-v4
// (llama.cpp, f32 activations, QAT off) using the fixture's pooled tolerance (f32 tier):
// one-shot prefill of each prompt, then 16 teacher-forced single-token decode steps. The QAT-on
// path (the default that serves) is held against the engine's own QAT-off logits to a tier of
// its own (below).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/file_util.h"
#include "engine/engine.h"

namespace flashserve::engine {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kFixture = std::string(FLASHSERVE_SHARED) + "/golden/tiny-v4";

struct Metrics {
  double sum_cos = 0, min_cos = 1;
  int64_t rows = 0, top1 = 0;
  void Add(const float* ref, const float* got, int64_t vocab) {
    double dot = 0, nr = 0, ng = 0;
    int64_t ar = 0, ag = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      dot += static_cast<double>(ref[i]) * got[i];
      nr += static_cast<double>(ref[i]) * ref[i];
      ng += static_cast<double>(got[i]) * got[i];
      if (ref[i] > ref[ar]) ar = i;
      if (got[i] > got[ag]) ag = i;
    }
    double cos = dot / std::sqrt(nr * ng);
    if (!std::isfinite(cos)) cos = -1;
    sum_cos += cos;
    min_cos = std::min(min_cos, cos);
    top1 += ar == ag;
    ++rows;
  }
  void Merge(const Metrics& m) {
    sum_cos += m.sum_cos;
    min_cos = std::min(min_cos, m.min_cos);
    top1 += m.top1;
    rows += m.rows;
  }
  void Print(const std::string& name) const {
    std::printf("%-5s rows %4ld mean_cos %.9f min_cos %.7f top1 %.1f%%\n", name.c_str(), static_cast<long>(rows),
                sum_cos / rows, min_cos, 100.0 * top1 / rows);
  }
  // The fixture's pooled tolerance of one tier ("f32", "reduced_precision").
  void ExpectWithin(const Json& tier) const {
    EXPECT_EQ(rows, 1054);
    EXPECT_GE(sum_cos / rows, tier["mean_cos"].get<double>());
    EXPECT_GE(min_cos, tier["min_cos"].get<double>());
    EXPECT_GE(static_cast<double>(top1) / rows, tier["top1_agree"].get<double>());
  }
};

std::vector<float> ReadF32(const std::string& path) {
  std::string bytes = base::ReadFileToString(path).value();
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

Json ReadJson(const std::string& name) { return Json::parse(base::ReadFileToString(kFixture + "/" + name).value()); }

// Every row of one fixture sequence: its prompt in chunks of `chunk` tokens (0 = one shot), then
// the 16 teacher-forced decode steps. Empty on an engine error (reported as a test failure).
std::vector<float> RunSequence(Engine& engine, const Json& s, size_t chunk, int64_t vocab) {
  const std::vector<int32_t> prompt = s["prompt"].get<std::vector<int32_t>>();
  const std::vector<int32_t> decode = s["decode"].get<std::vector<int32_t>>();
  std::vector<float> rows;
  auto state = engine.NewSequence();
  if (chunk == 0) chunk = prompt.size();
  for (size_t done = 0; done < prompt.size(); done += chunk) {
    const size_t n = std::min(chunk, prompt.size() - done);
    ForwardRequest req{state.get(), std::span<const int32_t>(prompt.data() + done, n), LogitsMode::kAll};
    auto result = engine.Forward({&req, 1});
    if (!result.ok()) {
      ADD_FAILURE() << result.error().ToString();
      return {};
    }
    for (size_t i = 0; i < n; ++i) {
      const float* row = result->row(0, static_cast<int64_t>(i));
      rows.insert(rows.end(), row, row + vocab);
    }
  }
  for (int32_t token : decode) {
    ForwardRequest step{state.get(), std::span<const int32_t>(&token, 1), LogitsMode::kLast};
    auto result = engine.Forward({&step, 1});
    if (!result.ok()) {
      ADD_FAILURE() << result.error().ToString();
      return {};
    }
    rows.insert(rows.end(), result->row(0, 0), result->row(0, 0) + vocab);
  }
  return rows;
}

// Pooled metrics of `got` against `want`, both a function from a sequence to its rows.
template <typename Want, typename Got>
Metrics Compare(Want want, Got got) {
  const Json seqs = ReadJson("sequences.json");
  const int64_t vocab = seqs["vocab_size"].get<int64_t>();
  Metrics all;
  for (const Json& s : seqs["sequences"]) {
    const std::vector<float> w = want(s, vocab), g = got(s, vocab);
    const int64_t rows = s["rows"].get<int64_t>();
    if (static_cast<int64_t>(w.size()) != rows * vocab || static_cast<int64_t>(g.size()) != rows * vocab) {
      ADD_FAILURE() << s["name"] << ": " << w.size() << " and " << g.size() << " values, want " << rows * vocab;
      continue;
    }
    Metrics seq;
    for (int64_t r = 0; r < rows; ++r) seq.Add(w.data() + r * vocab, g.data() + r * vocab, vocab);
    seq.Print(s["name"].get<std::string>());
    all.Merge(seq);
  }
  all.Print("all");
  return all;
}

std::vector<float> Reference(const Json& s, int64_t) {
  return ReadF32(kFixture + "/" + s["name"].get<std::string>() + ".logits.f32");
}

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kFixture + "/model/model.safetensors"))
      GTEST_SKIP() << "golden fixture not found at " << kFixture << " (it lives in ../shared; skipped)";
    auto model = Model::Load(kFixture + "/model");
    ASSERT_TRUE(model.ok()) << model.error().ToString();
    model_ = std::move(model).value();
  }
  // Rows of the engine with QAT on or off, the prompt fed in chunks of `chunk` (0 = one shot).
  auto Rows(bool qat, size_t chunk = 0) {
    EngineOptions options;
    options.qat = qat;
    auto engine = std::make_shared<Engine>(*model_, options);
    return [engine, chunk](const Json& s, int64_t vocab) { return RunSequence(*engine, s, chunk, vocab); };
  }
  static Json Tier(const char* name) { return ReadJson("summary.json")["tolerance"][name]; }

  std::unique_ptr<Model> model_;
};

class GoldenChunkTest : public GoldenTest, public ::testing::WithParamInterface<int> {};

TEST_P(GoldenChunkTest, QatOffMatchesReferenceWithinF32Tier) {
  Compare(Reference, Rows(/*qat=*/false, static_cast<size_t>(GetParam()))).ExpectWithin(Tier("f32"));
}

INSTANTIATE_TEST_SUITE_P(Prompt, GoldenChunkTest, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "OneShot" : "TokenByToken"; });

// QAT rounds the activations in front of the FP8 products to FP8 (3 mantissa bits), the KV
// entries' non-RoPE part to FP8 and the indexer's q and k to FP4: far coarser than the BF16 /
// q8_0 rounding behind the fixture's reduced-precision tier, so QAT has a tier of its own,
// derived the way the fixture derives its tiers (each limit doubles the measured distance from
// perfect agreement). Measured against QAT off on this fixture with AVX-512 kernels: mean cos
// 0.98770, min 0.91244, top-1 74.1%.
const Json kQatTier = {{"mean_cos", 0.975}, {"min_cos", 0.82}, {"top1_agree", 0.48}};

TEST_F(GoldenTest, QatOnStaysWithinItsTierOfQatOff) {
  const Metrics m = Compare(Rows(/*qat=*/false), Rows(/*qat=*/true));
  m.ExpectWithin(kQatTier);
  // QAT does round: its logits are outside the exact (f32) tier, as the fixture predicts.
  EXPECT_LT(m.sum_cos / m.rows, Tier("f32")["mean_cos"].get<double>());
}

}  // namespace
}  // namespace flashserve::engine
