// Compares the engine with the independent reference logits in ../shared/golden/tiny-v4
// (llama.cpp, f32 activations, QAT off) using the fixture's pooled tolerance (f32 tier):
// one-shot prefill of each prompt, then 16 teacher-forced single-token decode steps.
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
};

std::vector<float> ReadF32(const std::string& path) {
  std::string bytes = base::ReadFileToString(path).value();
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Param: prompt chunk size (0 = one-shot prefill, 1 = token-by-token decode of the prompt).
class GoldenTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!fs::exists(kFixture + "/model/model.safetensors"))
      GTEST_SKIP() << "golden fixture not found at " << kFixture << " (it lives in ../shared; skipped)";
  }
};

TEST_P(GoldenTest, PrefillAndDecodeMatchReferenceWithinF32Tier) {
  auto model = Model::Load(kFixture + "/model");
  ASSERT_TRUE(model.ok()) << model.error().ToString();
  EngineOptions options;
  options.qat = false;
  Engine engine(**model, options);
  auto seqs = nlohmann::json::parse(base::ReadFileToString(kFixture + "/sequences.json").value());
  auto summary = nlohmann::json::parse(base::ReadFileToString(kFixture + "/summary.json").value());
  const auto& tol = summary["tolerance"]["f32"];
  const int64_t vocab = seqs["vocab_size"].get<int64_t>();
  Metrics all;
  for (const auto& s : seqs["sequences"]) {
    std::vector<int32_t> prompt = s["prompt"].get<std::vector<int32_t>>();
    std::vector<int32_t> decode = s["decode"].get<std::vector<int32_t>>();
    std::vector<float> ref = ReadF32(kFixture + "/" + s["name"].get<std::string>() + ".logits.f32");
    ASSERT_EQ(static_cast<int64_t>(ref.size()), s["rows"].get<int64_t>() * vocab);
    auto state = engine.NewSequence();
    Metrics seq;
    const size_t chunk = GetParam() > 0 ? static_cast<size_t>(GetParam()) : prompt.size();
    for (size_t done = 0; done < prompt.size(); done += chunk) {
      const size_t n = std::min(chunk, prompt.size() - done);
      ForwardRequest req{state.get(), std::span<const int32_t>(prompt.data() + done, n), LogitsMode::kAll};
      auto result = engine.Forward({&req, 1});
      ASSERT_TRUE(result.ok()) << result.error().ToString();
      for (size_t i = 0; i < n; ++i) seq.Add(ref.data() + (done + i) * vocab, result->row(0, static_cast<int64_t>(i)), vocab);
    }
    for (size_t k = 0; k < decode.size(); ++k) {
      ForwardRequest step{state.get(), std::span<const int32_t>(&decode[k], 1), LogitsMode::kLast};
      auto r = engine.Forward({&step, 1});
      ASSERT_TRUE(r.ok());
      seq.Add(ref.data() + (prompt.size() + k) * vocab, r->row(0, 0), vocab);
    }
    std::printf("%-5s rows %4ld mean_cos %.9f min_cos %.7f top1 %.1f%%\n", s["name"].get<std::string>().c_str(),
                static_cast<long>(seq.rows), seq.sum_cos / seq.rows, seq.min_cos, 100.0 * seq.top1 / seq.rows);
    all.sum_cos += seq.sum_cos;
    all.min_cos = std::min(all.min_cos, seq.min_cos);
    all.top1 += seq.top1;
    all.rows += seq.rows;
  }
  std::printf("all   rows %4ld mean_cos %.9f min_cos %.7f top1 %.1f%%\n", static_cast<long>(all.rows),
              all.sum_cos / all.rows, all.min_cos, 100.0 * all.top1 / all.rows);
  EXPECT_EQ(all.rows, 1054);
  EXPECT_GE(all.sum_cos / all.rows, tol["mean_cos"].get<double>());
  EXPECT_GE(all.min_cos, tol["min_cos"].get<double>());
  EXPECT_GE(static_cast<double>(all.top1) / all.rows, tol["top1_agree"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Prompt, GoldenTest, ::testing::Values(0, 1),
                         [](const auto& info) { return info.param == 0 ? "OneShot" : "TokenByToken"; });

}  // namespace
}  // namespace flashserve::engine
