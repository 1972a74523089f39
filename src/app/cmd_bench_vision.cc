// `flashserve bench-vision`: the vision tower (ViT + aligner) per picture of the largest plan
// (384 tokens by default), at batch 1 (ViT and aligner timed apart) and larger batches (one
// tower run over all the pictures, as the encode stage batches queued requests), next to its
// floor: the tower's FLOPs over the FMA peak measured by the same tool before and after the runs
// (the better of the two).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "app/cli_util.h"
#include "app/commands.h"
#include "engine/vision_tower.h"
#include "kernels/gemm/matmul.h"
#include "kernels/roofline.h"

namespace flashserve::app {

namespace {

struct VisionBenchFlags {
  std::string model;
  int llm_h = 16, llm_w = 24, runs = 5;
  std::string batches = "1,8";
  engine::EngineOptions options;
  bool no_qat = false;  // the tower has no QAT; the flag is accepted for symmetry with bench-forward
};

// The tower's multiply-adds x 2 for one picture of vit_h x vit_w patches.
struct TowerFlops {
  double matmul = 0, attention = 0, aligner = 0;
  double total() const { return matmul + attention + aligner; }
};

TowerFlops CountFlops(const model::ModelConfig& c, int vit_h, int vit_w) {
  const model::VisionTowerConfig& v = c.vision;
  const double n = static_cast<double>(vit_h) * vit_w, d = v.dim, inter = v.inter_dim;
  const double patch = 3.0 * v.patch_size * v.patch_size, r = v.downsample_ratio, hidden = c.hidden_size;
  const double cells = std::ceil(vit_h / r) * std::ceil(vit_w / r);
  TowerFlops f;
  f.matmul = 2 * n * patch * d + v.num_layers * 2 * n * (3 * d * d + d * d + 3 * d * inter);
  f.attention = v.num_layers * 4.0 * n * n * d;  // q k^T and p v, every head
  f.aligner = 2 * cells * (r * r * d * hidden + hidden * hidden);
  return f;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunBenchVision(const VisionBenchFlags& f) {
  auto batches = ParseTokenList(f.batches);
  if (!batches.ok()) return PrintError(batches.error());
  std::unique_ptr<engine::Model> model = LoadModelOrPrint(f.model, f.options, "");
  if (!model) return 1;
  const model::ModelConfig& c = model->config();
  if (!c.vision.present()) return PrintError(base::Error(base::ErrorCode::kInvalidArgument, "the model has no vision tower"));
  const int r = c.vision.downsample_ratio, vit_h = f.llm_h * r, vit_w = f.llm_w * r, p = c.vision.patch_size;
  base::ThreadPool pool(f.options.num_threads);
  const double peak_before = kernels::MeasureFmaPeak(pool);
  std::vector<float> patches(static_cast<size_t>(vit_h) * vit_w * 3 * p * p);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> level(-1.0f, 1.0f);
  for (float& v : patches) v = level(rng);
  engine::VisionTower tower(*model, pool);
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); };
  if (auto warm = tower.Encode(patches, vit_h, vit_w); !warm.ok()) return PrintError(warm.error());
  struct Result { int batch; double ms_per_image, vit_ms, aligner_ms; };
  std::vector<Result> results;
  for (int32_t batch : *batches) {
    std::vector<double> per_image, vit_ms, aligner_ms;
    for (int run = 0; run < f.runs; ++run) {
      const auto start = Clock::now();
      if (batch > 1) {  // one run over all of them
        std::vector<engine::PicturePatches> pictures(static_cast<size_t>(batch), {patches, vit_h, vit_w});
        if (auto rows = tower.EncodeBatch(pictures); !rows.ok()) return PrintError(rows.error());
        per_image.push_back(1e3 * seconds(start) / batch);
        continue;
      }
      for (int i = 0; i < batch; ++i) {
        const auto t0 = Clock::now();
        auto vit = tower.RunVit(patches, vit_h, vit_w);
        if (!vit.ok()) return PrintError(vit.error());
        vit_ms.push_back(1e3 * seconds(t0));
        const auto t1 = Clock::now();
        const std::vector<float> rows = tower.RunAligner(*vit, vit_h, vit_w);
        aligner_ms.push_back(1e3 * seconds(t1));
      }
      per_image.push_back(1e3 * seconds(start) / batch);
    }
    results.push_back({batch, Median(per_image), vit_ms.empty() ? -1.0 : Median(vit_ms),
                       aligner_ms.empty() ? -1.0 : Median(aligner_ms)});
  }
  const double peak = std::max(peak_before, kernels::MeasureFmaPeak(pool));
  const TowerFlops flops = CountFlops(c, vit_h, vit_w);
  const double floor_ms = 1e3 * flops.total() / (peak * 1e9);
  std::printf("machine: %d threads, ISA %s (AMX %s), FMA peak %.1f GFLOP/s (before / after the runs: %.1f / %.1f)\n",
              pool.num_threads(), kernels::MatMulIsa(), kernels::AmxOn() ? "on" : "off", peak, peak_before,
              peak);
  std::printf("tower: %d layers, width %d, %d heads, SwiGLU %d; picture %dx%d patches -> %d tokens (%dx%d)\n",
              c.vision.num_layers, c.vision.dim, c.vision.num_heads, c.vision.inter_dim, vit_h, vit_w,
              f.llm_h * f.llm_w, f.llm_h, f.llm_w);
  std::printf("GFLOP per picture: %.1f (linear %.1f, attention %.1f, aligner %.1f); floor %.1f ms per picture\n",
              flops.total() / 1e9, flops.matmul / 1e9, flops.attention / 1e9, flops.aligner / 1e9, floor_ms);
  std::printf("%-8s %12s %10s %12s %9s %10s %12s\n", "batch", "ms/picture", "pictures/s", "floor ms", "% floor",
              "ViT ms", "aligner ms");
  for (const Result& res : results) {
    std::printf("%-8d %12.1f %10.3f %12.1f %8.1f%%", res.batch, res.ms_per_image, 1e3 / res.ms_per_image, floor_ms,
                100.0 * floor_ms / res.ms_per_image);
    if (res.vit_ms >= 0) {
      std::printf(" %10.1f %12.1f\n", res.vit_ms, res.aligner_ms);
    } else {
      std::printf(" %10s %12s\n", "(one run)", "-");
    }
  }
  return 0;
}

}  // namespace

void RegisterBenchVisionCommand(CLI::App& app, CommandFn* run) {
  auto f = std::make_shared<VisionBenchFlags>();
  auto* cmd = app.add_subcommand("bench-vision",
                                 "Vision tower (ViT + aligner) ms per picture against its FLOP floor");
  cmd->add_option("--model", f->model, "Checkpoint with a vision tower (make-model --preset tower-v41: the released size)")
      ->required();
  cmd->add_option("--grid", f->llm_h, "Token rows of the picture (columns: --grid-cols); 16 x 24 = 384 tokens")
      ->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--grid-cols", f->llm_w, "Token columns of the picture")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--batches", f->batches, "Pictures per timed run, e.g. 1,8 (above 1: one tower run over them all)")->capture_default_str();
  cmd->add_option("--runs", f->runs, "Timed runs per batch (the median is reported)")->check(CLI::Range(1, 100))->capture_default_str();
  AddEngineFlags(cmd, &f->options, &f->no_qat);
  cmd->callback([f, run] { *run = [f] { return RunBenchVision(*f); }; });
}

}  // namespace flashserve::app
