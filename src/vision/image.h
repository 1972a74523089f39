// Decoded pictures as the vision room passes them around: 8-bit RGB, rows top to bottom, pixels
// interleaved. Plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace flashserve::vision {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3

  RgbImage() = default;
  RgbImage(int w, int h) : width(w), height(h), pixels(static_cast<size_t>(w) * h * 3) {}
  uint8_t* Row(int y) { return pixels.data() + static_cast<size_t>(y) * width * 3; }
  const uint8_t* Row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

}  // namespace flashserve::vision
