// The released token plan of an image for DeepSeek-V4 vision checkpoints: the pixel size the image
// is padded or stretched to, its ViT patch grid, its aligner grid and the placeholder span it
// takes in the prompt (V4.1's reading-order span, Vision-Exp's paired-row block). Pure functions
// with the reference's arithmetic (IEEE doubles, the same order of operations).
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"

namespace flashserve::vision {

enum class SpanLayout {
  kV41,        // [START] + ([IMAGE] * w + [NEWLINE]) * h + [END], one id at every position
  kVisionExp,  // DeepSeek-V4-Flash-Vision-Exp: padded, rows interleaved in pairs, one id per role
};

// The checkpoint's `vision_*` preprocessing parameters (released values as defaults).
struct VisionParams {
  int patch_size = 14;
  int downsample_ratio = 3;
  int max_n_token = 384;
  int64_t min_pixels = 147456;
  int max_wh_ratio = 8;  // 0 = no limit
  SpanLayout layout = SpanLayout::kV41;
};

struct ImagePlan {
  int64_t source_width = 0, source_height = 0;
  int resized_width = 0, resized_height = 0;  // the pixel size the tower sees
  bool stretch = false;  // wider than max_wh_ratio: resized to the plan; otherwise padded (gray 127)
  int vit_h = 0, vit_w = 0;  // patch grid
  int llm_h = 0, llm_w = 0;  // aligner grid (one embedding per cell)
  int span_tokens = 0;       // placeholder positions in the prompt (Vision-Exp: without the start pad)
};

// kInvalidArgument for a zero or negative size or parameters the reference cannot plan.
base::Result<ImagePlan> PlanImage(int64_t width, int64_t height, const VisionParams& params);

// Role of each span position.
enum class SpanRole : uint8_t { kStart = 0, kPad = 1, kImage = 2, kNewline = 3, kEnd = 4 };

struct ImageSpan {
  std::vector<SpanRole> roles;
  // For each kImage position in order, the aligner output row (reading order index) it takes.
  std::vector<int32_t> image_rows;
};

// The span of an image whose first placeholder lands at prompt position `start` (Vision-Exp
// pads to the compressor's 4-token groups; V4.1 ignores `start`).
ImageSpan BuildSpan(const ImagePlan& plan, SpanLayout layout, int64_t start);

}  // namespace flashserve::vision
