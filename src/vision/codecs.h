// One decoder per format behind vision/decode.h (internal to the vision room). Each reads only
// the header in Probe*, and decodes the first frame to RGB in Decode*, reporting the EXIF
// orientation it found (1 when none). Pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"
#include "vision/decode.h"
#include "vision/image.h"

namespace flashserve::vision::internal {

struct Decoded {
  RgbImage image;
  int orientation = 1;
};

base::Result<ImageHeader> ProbePng(std::span<const uint8_t> bytes);
base::Result<Decoded> DecodePng(std::span<const uint8_t> bytes);
base::Result<ImageHeader> ProbeJpeg(std::span<const uint8_t> bytes);
base::Result<Decoded> DecodeJpeg(std::span<const uint8_t> bytes);
base::Result<ImageHeader> ProbeWebp(std::span<const uint8_t> bytes);
base::Result<Decoded> DecodeWebp(std::span<const uint8_t> bytes);
base::Result<ImageHeader> ProbeGif(std::span<const uint8_t> bytes);
base::Result<Decoded> DecodeGif(std::span<const uint8_t> bytes);
base::Result<ImageHeader> ProbeBmp(std::span<const uint8_t> bytes);
base::Result<Decoded> DecodeBmp(std::span<const uint8_t> bytes);

// The Orientation tag (1-8) of an EXIF block ("Exif\0\0" + TIFF, or bare TIFF); 1 when absent.
int ExifOrientation(std::span<const uint8_t> exif);

base::Error BadImage(std::string_view format, std::string_view why);

}  // namespace flashserve::vision::internal
