// GIF through giflib (the first frame on its logical screen, as Pillow shows it: the area outside
// the frame takes colour index 0, or the transparent index when the frame has one) and BMP
// through stb_image (vision/codecs.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include <gif_lib.h>
#include <stb_image.h>

#include "vision/codecs.h"

namespace flashserve::vision::internal {
namespace {

struct GifInput {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
};

int ReadGif(GifFileType* gif, GifByteType* out, int n) {
  auto* in = static_cast<GifInput*>(gif->UserData);
  const size_t take = std::min(static_cast<size_t>(n), in->bytes.size() - in->pos);
  std::memcpy(out, in->bytes.data() + in->pos, take);
  in->pos += take;
  return static_cast<int>(take);
}

class GifReader {
 public:
  explicit GifReader(std::span<const uint8_t> bytes) : input_{bytes, 0} {
    int error = 0;
    gif_ = DGifOpen(&input_, ReadGif, &error);
  }
  ~GifReader() {
    int error = 0;
    if (gif_ != nullptr) DGifCloseFile(gif_, &error);
  }
  GifReader(const GifReader&) = delete;
  GifReader& operator=(const GifReader&) = delete;

  base::Result<ImageHeader> Probe() {
    if (gif_ == nullptr) return BadImage("GIF", "bad header");
    return ImageHeader{ImageFormat::kGif, gif_->SWidth, gif_->SHeight};
  }

  base::Result<Decoded> Decode() {
    if (gif_ == nullptr) return BadImage("GIF", "bad header");
    int transparent = -1;
    for (;;) {
      GifRecordType type;
      if (DGifGetRecordType(gif_, &type) == GIF_ERROR) return BadImage("GIF", "truncated data");
      if (type == TERMINATE_RECORD_TYPE) return BadImage("GIF", "no frame");
      if (type == IMAGE_DESC_RECORD_TYPE) return FirstFrame(transparent);
      if (type == EXTENSION_RECORD_TYPE && !SkipExtension(&transparent)) return BadImage("GIF", "bad extension");
    }
  }

 private:
  bool SkipExtension(int* transparent) {
    int code = 0;
    GifByteType* block = nullptr;
    if (DGifGetExtension(gif_, &code, &block) == GIF_ERROR) return false;
    if (code == GRAPHICS_EXT_FUNC_CODE && block != nullptr && block[0] >= 4) {
      *transparent = (block[1] & 1) ? block[4] : -1;
    }
    while (block != nullptr) {
      if (DGifGetExtensionNext(gif_, &block) == GIF_ERROR) return false;
    }
    return true;
  }

  base::Result<Decoded> FirstFrame(int transparent) {
    if (DGifGetImageDesc(gif_) == GIF_ERROR) return BadImage("GIF", "bad frame descriptor");
    const GifImageDesc& d = gif_->Image;
    if (d.Width <= 0 || d.Height <= 0 || static_cast<int64_t>(d.Width) * d.Height > 1LL << 31) {
      return BadImage("GIF", "bad frame size");
    }
    const int W = gif_->SWidth, H = gif_->SHeight;
    std::vector<uint8_t> canvas(static_cast<size_t>(W) * H, static_cast<uint8_t>(transparent >= 0 ? transparent : 0));
    std::vector<GifPixelType> line(d.Width);
    for (int i = 0; i < d.Height; ++i) {
      if (DGifGetLine(gif_, line.data(), d.Width) == GIF_ERROR) return BadImage("GIF", "truncated frame");
      const int y = d.Top + FrameRow(i, d.Height, d.Interlace);
      if (y < 0 || y >= H) continue;
      for (int x = 0; x < d.Width; ++x) {
        if (d.Left + x >= 0 && d.Left + x < W) canvas[static_cast<size_t>(y) * W + d.Left + x] = line[x];
      }
    }
    const ColorMapObject* map = d.ColorMap != nullptr ? d.ColorMap : gif_->SColorMap;
    Decoded out;
    out.image = RgbImage(W, H);
    for (size_t i = 0; i < canvas.size(); ++i) {
      uint8_t* px = &out.image.pixels[i * 3];
      const int index = canvas[i];
      if (map == nullptr) {
        px[0] = px[1] = px[2] = static_cast<uint8_t>(index);
      } else if (index < map->ColorCount) {
        px[0] = map->Colors[index].Red, px[1] = map->Colors[index].Green, px[2] = map->Colors[index].Blue;
      } else {
        px[0] = px[1] = px[2] = 0;
      }
    }
    return out;
  }

  // Row of the i-th decoded line: interlaced frames come in four passes (every 8th from 0, every
  // 8th from 4, every 4th from 2, every 2nd from 1).
  static int FrameRow(int i, int height, bool interlaced) {
    if (!interlaced) return i;
    const int offsets[4] = {0, 4, 2, 1}, steps[4] = {8, 8, 4, 2};
    for (int pass = 0; pass < 4; ++pass) {
      const int rows = offsets[pass] < height ? (height - offsets[pass] + steps[pass] - 1) / steps[pass] : 0;
      if (i < rows) return offsets[pass] + i * steps[pass];
      i -= rows;
    }
    return height;
  }

  GifInput input_;
  GifFileType* gif_ = nullptr;
};

}  // namespace

base::Result<ImageHeader> ProbeGif(std::span<const uint8_t> bytes) { return GifReader(bytes).Probe(); }

base::Result<Decoded> DecodeGif(std::span<const uint8_t> bytes) { return GifReader(bytes).Decode(); }

base::Result<ImageHeader> ProbeBmp(std::span<const uint8_t> bytes) {
  int w = 0, h = 0, channels = 0;
  if (bytes.size() > INT32_MAX || !stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &channels)) {
    return BadImage("BMP", "bad header");
  }
  return ImageHeader{ImageFormat::kBmp, w, h};
}

base::Result<Decoded> DecodeBmp(std::span<const uint8_t> bytes) {
  int w = 0, h = 0, channels = 0;
  stbi_uc* data = stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &channels, 3);
  if (data == nullptr) return BadImage("BMP", stbi_failure_reason() ? stbi_failure_reason() : "corrupt data");
  Decoded out;
  out.image = RgbImage(w, h);
  std::memcpy(out.image.pixels.data(), data, out.image.pixels.size());
  stbi_image_free(data);
  return out;
}

}  // namespace flashserve::vision::internal
