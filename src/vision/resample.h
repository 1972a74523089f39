// Resizing as the released preprocessing does it with Pillow: bicubic (a = -0.5) separable
// convolution whose support widens with the reduction factor, 22-bit fixed-point coefficients,
// rounding and clamping to 8 bits after the horizontal and after the vertical pass; and
// ImageOps.pad (aspect-preserving resize with Python rounding, centred on a fill colour).
// Pure functions.
#pragma once

#include <cstdint>

#include "vision/image.h"

namespace flashserve::vision {

RgbImage ResizeBicubic(const RgbImage& in, int out_width, int out_height);

// Fits `in` inside out_width x out_height keeping its aspect ratio, then centres it on `fill`.
RgbImage PadTo(const RgbImage& in, int out_width, int out_height, uint8_t fill);

// EXIF orientation (1-8) undone: the picture as a viewer shows it. Other values: a copy.
RgbImage ApplyOrientation(const RgbImage& in, int orientation);

}  // namespace flashserve::vision
