// WebP through libwebp (vision/codecs.h): still pictures with WebPDecodeRGBInto, animations'
// first frame with the demux animation decoder, the EXIF chunk for orientation.
#include <cstring>

#include <webp/decode.h>
#include <webp/demux.h>

#include "vision/codecs.h"

namespace flashserve::vision::internal {
namespace {

int WebpOrientation(std::span<const uint8_t> bytes) {
  WebPData data{bytes.data(), bytes.size()};
  WebPDemuxer* demux = WebPDemux(&data);
  if (demux == nullptr) return 1;
  int orientation = 1;
  WebPChunkIterator chunk;
  if (WebPDemuxGetChunk(demux, "EXIF", 1, &chunk)) {
    orientation = ExifOrientation({chunk.chunk.bytes, chunk.chunk.size});
    WebPDemuxReleaseChunkIterator(&chunk);
  }
  WebPDemuxDelete(demux);
  return orientation;
}

base::Result<RgbImage> FirstAnimationFrame(std::span<const uint8_t> bytes) {
  WebPData data{bytes.data(), bytes.size()};
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) return BadImage("WebP", "decoder version mismatch");
  options.color_mode = MODE_RGBA;
  WebPAnimDecoder* decoder = WebPAnimDecoderNew(&data, &options);
  if (decoder == nullptr) return BadImage("WebP", "bad animation");
  WebPAnimInfo info;
  uint8_t* frame = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetInfo(decoder, &info) || !WebPAnimDecoderGetNext(decoder, &frame, &timestamp)) {
    WebPAnimDecoderDelete(decoder);
    return BadImage("WebP", "no decodable frame");
  }
  RgbImage out(static_cast<int>(info.canvas_width), static_cast<int>(info.canvas_height));
  for (size_t i = 0, n = static_cast<size_t>(out.width) * out.height; i < n; ++i) {
    std::memcpy(&out.pixels[i * 3], frame + i * 4, 3);
  }
  WebPAnimDecoderDelete(decoder);
  return out;
}

}  // namespace

base::Result<ImageHeader> ProbeWebp(std::span<const uint8_t> bytes) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &features) != VP8_STATUS_OK) {
    return BadImage("WebP", "bad header");
  }
  return ImageHeader{ImageFormat::kWebp, features.width, features.height};
}

base::Result<Decoded> DecodeWebp(std::span<const uint8_t> bytes) {
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &features) != VP8_STATUS_OK) {
    return BadImage("WebP", "bad header");
  }
  Decoded out;
  if (features.has_animation) {
    FS_ASSIGN_OR_RETURN(out.image, FirstAnimationFrame(bytes));
  } else {
    out.image = RgbImage(features.width, features.height);
    const int stride = features.width * 3;
    if (WebPDecodeRGBInto(bytes.data(), bytes.size(), out.image.pixels.data(), out.image.pixels.size(), stride) ==
        nullptr) {
      return BadImage("WebP", "corrupt picture data");
    }
  }
  out.orientation = WebpOrientation(bytes);
  return out;
}

}  // namespace flashserve::vision::internal
