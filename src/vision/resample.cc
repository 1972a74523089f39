// Pillow-compatible bicubic resampling, padding and EXIF transposes (vision/resample.h).
#include "vision/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace flashserve::vision {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double Bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Per output pixel: the first input pixel, how many are used, and their fixed-point weights.
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // out_size x ksize
};

Taps Precompute(int in_size, int out_size) {
  const double scale = static_cast<double>(static_cast<float>(in_size)) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 2.0 * filter_scale;
  Taps t;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.weights.assign(static_cast<size_t>(out_size) * t.ksize, 0);
  std::vector<double> k(t.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    int xmin = static_cast<int>(center - support + 0.5);
    xmin = std::max(xmin, 0);
    int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double sum = 0.0;
    for (int x = 0; x < xmax; ++x) {
      k[x] = Bicubic((x + xmin - center + 0.5) * ss);
      sum += k[x];
    }
    for (int x = 0; x < xmax; ++x) {
      if (sum != 0.0) k[x] /= sum;
      const double scaled = k[x] * (1 << kPrecisionBits);
      t.weights[static_cast<size_t>(xx) * t.ksize + x] = static_cast<int32_t>(k[x] < 0 ? -0.5 + scaled : 0.5 + scaled);
    }
    t.first[xx] = xmin;
    t.count[xx] = xmax;
  }
  return t;
}

uint8_t Clip8(int32_t v) { return static_cast<uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255)); }

// Horizontal pass over rows [row0, row0 + rows) of `in`.
RgbImage Horizontal(const RgbImage& in, int out_width, int row0, int rows) {
  const Taps t = Precompute(in.width, out_width);
  RgbImage out(out_width, rows);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* src = in.Row(row0 + y);
    uint8_t* dst = out.Row(y);
    for (int xx = 0; xx < out_width; ++xx) {
      const int32_t* k = &t.weights[static_cast<size_t>(xx) * t.ksize];
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int x = 0; x < t.count[xx]; ++x) {
        const uint8_t* px = src + (t.first[xx] + x) * 3;
        for (int c = 0; c < 3; ++c) acc[c] += px[c] * k[x];
      }
      for (int c = 0; c < 3; ++c) dst[xx * 3 + c] = Clip8(acc[c]);
    }
  }
  return out;
}

RgbImage Vertical(const RgbImage& in, const Taps& t, int out_height, int row_shift) {
  RgbImage out(in.width, out_height);
  for (int yy = 0; yy < out_height; ++yy) {
    const int32_t* k = &t.weights[static_cast<size_t>(yy) * t.ksize];
    const int first = t.first[yy] - row_shift;
    uint8_t* dst = out.Row(yy);
    for (int i = 0; i < in.width * 3; ++i) {
      int32_t acc = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < t.count[yy]; ++y) acc += in.Row(first + y)[i] * k[y];
      dst[i] = Clip8(acc);
    }
  }
  return out;
}

}  // namespace

RgbImage ResizeBicubic(const RgbImage& in, int out_width, int out_height) {
  const bool horizontal = out_width != in.width;
  const bool vertical = out_height != in.height;
  if (!horizontal && !vertical) return in;
  const Taps vt = Precompute(in.height, out_height);
  // Only the rows the vertical pass reads go through the horizontal pass.
  const int row_first = vt.first[0];
  const int row_last = vt.first[out_height - 1] + vt.count[out_height - 1];
  if (!horizontal) return Vertical(in, vt, out_height, 0);
  RgbImage wide = Horizontal(in, out_width, row_first, row_last - row_first);
  if (!vertical) return wide;
  return Vertical(wide, vt, out_height, row_first);
}

RgbImage PadTo(const RgbImage& in, int out_width, int out_height, uint8_t fill) {
  // ImageOps.contain: compare ratios as doubles, round() half to even.
  const double im_ratio = static_cast<double>(in.width) / in.height;
  const double dest_ratio = static_cast<double>(out_width) / out_height;
  int w = out_width, h = out_height;
  if (im_ratio > dest_ratio) {
    h = static_cast<int>(std::nearbyint(static_cast<double>(in.height) / in.width * out_width));
  } else if (im_ratio < dest_ratio) {
    w = static_cast<int>(std::nearbyint(static_cast<double>(in.width) / in.height * out_height));
  }
  RgbImage resized = ResizeBicubic(in, w, h);
  if (w == out_width && h == out_height) return resized;
  RgbImage out(out_width, out_height);
  std::memset(out.pixels.data(), fill, out.pixels.size());
  const int x0 = w != out_width ? static_cast<int>(std::nearbyint((out_width - w) * 0.5)) : 0;
  const int y0 = w != out_width ? 0 : static_cast<int>(std::nearbyint((out_height - h) * 0.5));
  for (int y = 0; y < h; ++y) {
    std::memcpy(out.Row(y0 + y) + static_cast<size_t>(x0) * 3, resized.Row(y), static_cast<size_t>(w) * 3);
  }
  return out;
}

RgbImage ApplyOrientation(const RgbImage& in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int W = in.width, H = in.height;
  const bool swap = orientation >= 5;
  RgbImage out(swap ? H : W, swap ? W : H);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2: sx = W - 1 - x; break;                      // mirror left-right
        case 3: sx = W - 1 - x; sy = H - 1 - y; break;      // rotate 180
        case 4: sy = H - 1 - y; break;                      // mirror top-bottom
        case 5: sx = y; sy = x; break;                      // transpose
        case 6: sx = y; sy = H - 1 - x; break;              // rotate 90 clockwise
        case 7: sx = W - 1 - y; sy = H - 1 - x; break;      // transverse
        case 8: sx = W - 1 - y; sy = x; break;              // rotate 90 counter-clockwise
      }
      std::memcpy(out.Row(y) + x * 3, in.Row(sy) + sx * 3, 3);
    }
  }
  return out;
}

}  // namespace flashserve::vision
