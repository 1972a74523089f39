// `flashserve image-info`: what the vision preprocessing makes of pictures (format, size, the
// planned pixel size, patch and aligner grids, prompt tokens, content key), optionally writing
// the resized pixels, and with --model the tower's outputs; with --sizes, plans for
// "WIDTH HEIGHT" lines read from stdin. Main thread.
#include <cstdio>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/cli_util.h"
#include "app/commands.h"
#include "base/bytes.h"
#include "base/file_util.h"
#include "base/thread_pool.h"
#include "engine/model.h"
#include "engine/vision_tower.h"
#include "vision/decode.h"
#include "vision/preprocess.h"

namespace flashserve::app {
namespace {

struct ImageInfoFlags {
  std::vector<std::string> files;
  std::string layout = "v41";
  std::string pixels_dir;
  bool sizes = false;
  std::string model_dir;
  std::string tower_out;
  int threads = 0;
  vision::ImageLimits limits;
};

// The tower's outputs for one picture, written as raw little-endian f32 files beside each other.
struct TowerRun {
  engine::Model* model = nullptr;
  base::ThreadPool* pool = nullptr;
  std::string out_dir;
};

base::Status WriteFloats(const std::string& path, const std::vector<float>& values) {
  return base::WriteFileAtomic(path, std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4));
}

base::Status RunTower(const TowerRun& run, const vision::PreparedImage& image, const std::string& name) {
  const int p = run.model->config().vision.patch_size;
  const std::vector<float> patches = vision::PatchValues(image, p);
  engine::VisionTower tower(*run.model, *run.pool);
  FS_ASSIGN_OR_RETURN(std::vector<float> vit, tower.RunVit(patches, image.plan.vit_h, image.plan.vit_w));
  const std::vector<float> aligner = tower.RunAligner(vit, image.plan.vit_h, image.plan.vit_w);
  const std::string prefix = run.out_dir + "/" + name;
  FS_RETURN_IF_ERROR(WriteFloats(prefix + ".patches.f32", patches));
  FS_RETURN_IF_ERROR(WriteFloats(prefix + ".vit.f32", vit));
  return WriteFloats(prefix + ".aligner.f32", aligner);
}

nlohmann::json PlanJson(const vision::ImagePlan& plan) {
  return {{"width", plan.source_width},
          {"height", plan.source_height},
          {"resized", {plan.resized_width, plan.resized_height}},
          {"stretch", plan.stretch},
          {"vit_grid", {plan.vit_h, plan.vit_w}},
          {"llm_grid", {plan.llm_h, plan.llm_w}},
          {"tokens", plan.span_tokens}};
}

int PlanSizes(const vision::VisionParams& params) {
  int64_t w = 0, h = 0;
  int status = 0;
  while (std::cin >> w >> h) {
    auto plan = vision::PlanImage(w, h, params);
    if (!plan.ok()) {
      std::printf("%s\n", nlohmann::json{{"width", w}, {"height", h}, {"error", plan.error().message()}}.dump().c_str());
      status = 1;
      continue;
    }
    std::printf("%s\n", PlanJson(*plan).dump().c_str());
  }
  return status;
}

base::Result<nlohmann::json> DescribeFile(const std::string& path, const ImageInfoFlags& flags,
                                          const vision::VisionParams& params, const TowerRun& tower) {
  FS_ASSIGN_OR_RETURN(std::string bytes, base::ReadFileToString(path));
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  FS_ASSIGN_OR_RETURN(vision::ImageHeader header, vision::ProbeImage(data));
  FS_ASSIGN_OR_RETURN(vision::RgbImage image, vision::DecodeImage(data, flags.limits));
  FS_ASSIGN_OR_RETURN(vision::PreparedImage prepared, vision::PrepareImage(image, params, ""));
  nlohmann::json out = PlanJson(prepared.plan);
  out["file"] = path;
  out["format"] = std::string(vision::FormatName(header.format));
  out["key"] = base::HexEncode(prepared.key);
  if (!flags.pixels_dir.empty()) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const std::string target = flags.pixels_dir + "/" + name + ".rgb";
    const auto& px = prepared.pixels.pixels;
    FS_RETURN_IF_ERROR(base::WriteFileAtomic(target, std::string_view(reinterpret_cast<const char*>(px.data()), px.size())));
    out["pixels"] = target;
  }
  if (tower.model != nullptr) FS_RETURN_IF_ERROR(RunTower(tower, prepared, path.substr(path.find_last_of('/') + 1)));
  return out;
}

int Run(const ImageInfoFlags& flags) {
  vision::VisionParams params;
  params.layout = flags.layout == "vision-exp" ? vision::SpanLayout::kVisionExp : vision::SpanLayout::kV41;
  if (flags.sizes) return PlanSizes(params);
  std::unique_ptr<engine::Model> model;
  base::ThreadPool pool(flags.threads);
  TowerRun tower;
  if (!flags.model_dir.empty()) {
    auto loaded = engine::Model::Load(flags.model_dir);
    if (!loaded.ok()) {
      std::fprintf(stderr, "flashserve image-info: %s\n", loaded.error().ToString().c_str());
      return 1;
    }
    model = std::move(loaded).value();
    if (!model->config().vision.present()) {
      std::fprintf(stderr, "flashserve image-info: %s has no vision tower\n", flags.model_dir.c_str());
      return 1;
    }
    params = VisionParamsOf(model->config());
    tower = TowerRun{model.get(), &pool, flags.tower_out.empty() ? "." : flags.tower_out};
  }
  int status = 0;
  for (const std::string& path : flags.files) {
    auto info = DescribeFile(path, flags, params, tower);
    if (!info.ok()) {
      std::fprintf(stderr, "flashserve image-info: %s: %s\n", path.c_str(), info.error().ToString().c_str());
      status = 1;
      continue;
    }
    std::printf("%s\n", info->dump().c_str());
  }
  return status;
}

}  // namespace

void RegisterImageInfoCommand(CLI::App& app, CommandFn* run) {
  auto flags = std::make_shared<ImageInfoFlags>();
  CLI::App* cmd = app.add_subcommand("image-info", "How the vision preprocessing plans pictures (tokens, grids, key)");
  cmd->add_option("files", flags->files, "Image files (PNG, JPEG, WebP, GIF, BMP)");
  cmd->add_option("--layout", flags->layout, "Span layout: v41 (DeepSeek-V4.1) or vision-exp (V4-Flash-Vision-Exp)")
      ->check(CLI::IsMember({"v41", "vision-exp"}));
  cmd->add_option("--pixels-dir", flags->pixels_dir, "Write each picture's resized 8-bit RGB pixels to DIR/NAME.rgb");
  cmd->add_option("--model", flags->model_dir, "Plan with this checkpoint's vision config and run its tower")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--tower-out", flags->tower_out,
                  "With --model: write NAME.patches.f32, NAME.vit.f32 and NAME.aligner.f32 here (default .)");
  cmd->add_option("--threads", flags->threads, "Threads for the tower (0 = all cores)");
  cmd->add_flag("--sizes", flags->sizes, "Plan 'WIDTH HEIGHT' lines from stdin instead of files");
  cmd->add_option("--max-image-bytes", flags->limits.max_bytes, "Largest encoded image accepted")
      ->capture_default_str();
  cmd->add_option("--max-image-pixels", flags->limits.max_pixels, "Largest width x height accepted")
      ->capture_default_str();
  cmd->callback([flags, run]() { *run = [flags]() { return Run(*flags); }; });
}

}  // namespace flashserve::app
