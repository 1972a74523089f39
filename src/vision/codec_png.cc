// PNG through libpng's classic API (vision/codecs.h): palette and low-bit gray expanded, 16-bit
// samples cut to their high byte, gray replicated, alpha dropped, as Pillow's convert("RGB")
// sees them. libpng reports errors by longjmp, so each phase that can fail runs in a function
// whose locals are plain values.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "vision/codecs.h"

namespace flashserve::vision::internal {
namespace {

struct PngInput {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  char error[200] = "";
};

void ReadBytes(png_structp png, png_bytep out, size_t n) {
  auto* in = static_cast<PngInput*>(png_get_io_ptr(png));
  if (in->bytes.size() - in->pos < n) png_error(png, "truncated data");
  std::memcpy(out, in->bytes.data() + in->pos, n);
  in->pos += n;
}

void OnError(png_structp png, png_const_charp message) {
  auto* in = static_cast<PngInput*>(png_get_error_ptr(png));
  std::snprintf(in->error, sizeof in->error, "%s", message);
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}

bool ReadInfo(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return true;
}

bool ReadRows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

// Trailing chunks (an eXIf after the pixels); a failure here leaves the pixels intact.
bool ReadEnd(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_end(png, info);
  return true;
}

class PngReader {
 public:
  explicit PngReader(std::span<const uint8_t> bytes) {
    input_.bytes = bytes;
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, &input_, OnError, OnWarning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
    if (info_ != nullptr) png_set_read_fn(png_, &input_, ReadBytes);
  }
  ~PngReader() { png_destroy_read_struct(&png_, &info_, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  base::Result<Decoded> Decode() {
    if (info_ == nullptr) return BadImage("PNG", "out of memory");
    if (!ReadInfo(png_, info_)) return BadImage("PNG", input_.error);
    const int width = static_cast<int>(png_get_image_width(png_, info_));
    const int height = static_cast<int>(png_get_image_height(png_, info_));
    const int channels = png_get_channels(png_, info_);
    if (channels != 3 && channels != 4) return BadImage("PNG", "unexpected channel count");
    std::vector<uint8_t> raw(static_cast<size_t>(width) * height * channels);
    std::vector<png_bytep> rows(height);
    for (int y = 0; y < height; ++y) rows[y] = raw.data() + static_cast<size_t>(y) * width * channels;
    if (!ReadRows(png_, rows.data())) return BadImage("PNG", input_.error);
    Decoded out;
    out.image = RgbImage(width, height);
    for (size_t i = 0, n = static_cast<size_t>(width) * height; i < n; ++i) {
      std::memcpy(&out.image.pixels[i * 3], &raw[i * channels], 3);
    }
    ReadEnd(png_, info_);
    png_uint_32 exif_size = 0;
    png_bytep exif = nullptr;
    if (png_get_eXIf_1(png_, info_, &exif_size, &exif) != 0 && exif != nullptr) {
      out.orientation = ExifOrientation({exif, exif_size});
    }
    return out;
  }

 private:
  PngInput input_;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
};

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

base::Result<ImageHeader> ProbePng(std::span<const uint8_t> bytes) {
  // Signature (8), IHDR length (4) and type (4), then width and height, big-endian.
  if (bytes.size() < 24 || std::memcmp(bytes.data() + 12, "IHDR", 4) != 0) return BadImage("PNG", "no IHDR chunk");
  const uint32_t w = BigEndian32(bytes.data() + 16), h = BigEndian32(bytes.data() + 20);
  if (w > 0x7fffffffu || h > 0x7fffffffu) return BadImage("PNG", "size out of range");
  return ImageHeader{ImageFormat::kPng, static_cast<int>(w), static_cast<int>(h)};
}

base::Result<Decoded> DecodePng(std::span<const uint8_t> bytes) { return PngReader(bytes).Decode(); }

}  // namespace flashserve::vision::internal
