// Picture bytes from clients through the decoders (PNG, JPEG with EXIF, WebP, GIF, BMP) under
// the server's limits, then the token plan of what decoded (the resize is arithmetic on the
// plan, tested over sizes in vision_test). Any input: an error or a picture, never a crash, a
// sanitizer report or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <span>

#include "vision/decode.h"
#include "vision/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace flashserve::vision;
  ImageLimits limits;
  limits.max_pixels = 4'000'000;  // the fuzzer's memory limit, not the server's default
  auto pixels = DecodeImage(std::span<const uint8_t>(data, size), limits);
  if (!pixels.ok()) return 0;
  if (pixels->width <= 0 || pixels->height <= 0 ||
      static_cast<size_t>(pixels->width) * pixels->height * 3 != pixels->pixels.size())
    __builtin_trap();  // a decoded picture is exactly its pixels
  (void)PlanImage(pixels->width, pixels->height, VisionParams{});
  return 0;
}
