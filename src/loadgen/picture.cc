// Synthetic screenshots (loadgen/picture.h): libpng's simplified writer, OpenSSL's base64.
#include "loadgen/picture.h"

#include <png.h>

#include <openssl/evp.h>

#include <vector>

#include "base/check.h"
#include "loadgen/rng.h"

namespace flashserve::loadgen {

std::string PngDataUrl(int width, int height, uint64_t seed) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  Rng rng(seed, 0x5C8EE7, 0);
  const int panel = 64;  // 64 x 64 panels of one color each, a little noise on top
  std::vector<uint8_t> colors(static_cast<size_t>((width / panel + 1) * (height / panel + 1)) * 3);
  for (uint8_t& c : colors) c = static_cast<uint8_t>(rng.UniformInt(0, 255));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const size_t p = static_cast<size_t>((y / panel) * (width / panel + 1) + x / panel) * 3;
      for (int k = 0; k < 3; ++k)
        rgb[(static_cast<size_t>(y) * width + x) * 3 + k] = static_cast<uint8_t>(colors[p + k] ^ (rng.UniformInt(0, 7)));
    }
  }
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  FS_CHECK(png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0, nullptr), "PNG size: %s", image.message);
  std::vector<uint8_t> png(size);
  FS_CHECK(png_image_write_to_memory(&image, png.data(), &size, 0, rgb.data(), 0, nullptr), "PNG: %s", image.message);
  std::string b64(4 * ((size + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), png.data(), static_cast<int>(size));
  b64.resize(static_cast<size_t>(n));
  return "data:image/png;base64," + b64;
}

}  // namespace flashserve::loadgen
