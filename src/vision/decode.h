// Image bytes -> RgbImage with Debian's codec libraries (libpng, libjpeg-turbo, libwebp, giflib,
// stb_image for BMP), the way the released preprocessing sees a picture through Pillow: first
// frame, alpha dropped, 16-bit samples cut to their high byte, EXIF orientation applied. Limits
// are checked from the header before any pixel is decoded. Pure functions, any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/result.h"
#include "vision/image.h"

namespace flashserve::vision {

enum class ImageFormat { kPng, kJpeg, kWebp, kGif, kBmp };
std::string_view FormatName(ImageFormat format);

struct ImageLimits {
  int64_t max_bytes = 20 << 20;       // encoded size
  int64_t max_pixels = 40'000'000;    // width x height, from the header (decompression bombs)
};

struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  int width = 0, height = 0;  // as stored (before EXIF orientation)
};

// The format from the leading bytes and the size from the header. kInvalidArgument when the
// bytes are not a supported picture (the message names the formats accepted).
base::Result<ImageHeader> ProbeImage(std::span<const uint8_t> bytes);

// kInvalidArgument for undecodable data, kResourceExhausted when a limit is exceeded.
base::Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits);

}  // namespace flashserve::vision
