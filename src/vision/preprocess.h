// A decoded picture made ready for the tower, as the released preprocessing does it: planned
// (vision/plan.h), stretched or padded on gray 127 to the planned size, cut into patches and
// normalised (mean 0.5, std 0.5, rounded to bfloat16). Its content key names it in the caches.
// Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "vision/image.h"
#include "vision/plan.h"

namespace flashserve::vision {

// SHA-256 over the decoded pixels, the preprocessing parameters and the tower's checksum: equal
// keys mean equal tower outputs.
using ContentKey = std::array<uint8_t, 32>;

struct PreparedImage {
  ImagePlan plan;
  RgbImage pixels;  // resized_width x resized_height, 8-bit, what the patches are cut from
  ContentKey key{};
};

base::Result<PreparedImage> PrepareImage(const RgbImage& image, const VisionParams& params,
                                         std::string_view tower_checksum);

// [vit_h * vit_w][3][p][p] patch values in reading order, ((v / 255) - 0.5) / 0.5 as bfloat16.
std::vector<float> PatchValues(const PreparedImage& image, int patch_size);

ContentKey ImageContentKey(const RgbImage& image, const VisionParams& params, std::string_view tower_checksum);

}  // namespace flashserve::vision
