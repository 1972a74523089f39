// Resize/pad, patches and content keys (vision/preprocess.h).
#include "vision/preprocess.h"

#include <openssl/evp.h>

#include <bit>
#include <cstring>

#include "base/check.h"
#include "vision/resample.h"

namespace flashserve::vision {
namespace {

constexpr uint8_t kPadGray = 127;

float RoundToBf16(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest, ties to even (inputs are finite)
  return std::bit_cast<float>(bits & 0xffff0000u);
}

}  // namespace

ContentKey ImageContentKey(const RgbImage& image, const VisionParams& params, std::string_view tower_checksum) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  FS_CHECK(ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1, "SHA-256 init failed");
  auto update = [&](const void* data, size_t n) {
    FS_CHECK(EVP_DigestUpdate(ctx, data, n) == 1, "SHA-256 update failed");
  };
  const int64_t header[8] = {image.width, image.height, params.patch_size, params.downsample_ratio,
                             params.max_n_token, params.min_pixels, params.max_wh_ratio,
                             static_cast<int64_t>(params.layout)};
  update("flashserve-image-v1", 19);
  update(header, sizeof header);
  const uint64_t checksum_size = tower_checksum.size();
  update(&checksum_size, sizeof checksum_size);
  update(tower_checksum.data(), tower_checksum.size());
  update(image.pixels.data(), image.pixels.size());
  ContentKey key{};
  unsigned int len = 0;
  FS_CHECK(EVP_DigestFinal_ex(ctx, key.data(), &len) == 1 && len == key.size(), "SHA-256 final failed");
  EVP_MD_CTX_free(ctx);
  return key;
}

base::Result<PreparedImage> PrepareImage(const RgbImage& image, const VisionParams& params,
                                         std::string_view tower_checksum) {
  FS_ASSIGN_OR_RETURN(ImagePlan plan, PlanImage(image.width, image.height, params));
  PreparedImage out;
  out.plan = plan;
  out.pixels = plan.stretch ? ResizeBicubic(image, plan.resized_width, plan.resized_height)
                            : PadTo(image, plan.resized_width, plan.resized_height, kPadGray);
  out.key = ImageContentKey(image, params, tower_checksum);
  return out;
}

std::vector<float> PatchValues(const PreparedImage& image, int p) {
  const ImagePlan& plan = image.plan;
  std::vector<float> out(static_cast<size_t>(plan.vit_h) * plan.vit_w * 3 * p * p);
  float level[256];
  for (int v = 0; v < 256; ++v) level[v] = RoundToBf16((static_cast<float>(v) / 255.0f - 0.5f) / 0.5f);
  size_t i = 0;
  for (int ph = 0; ph < plan.vit_h; ++ph) {
    for (int pw = 0; pw < plan.vit_w; ++pw) {
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < p; ++y) {
          const uint8_t* row = image.pixels.Row(ph * p + y) + static_cast<size_t>(pw) * p * 3;
          for (int x = 0; x < p; ++x) out[i++] = level[row[x * 3 + c]];
        }
      }
    }
  }
  return out;
}

}  // namespace flashserve::vision
