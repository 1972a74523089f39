// JPEG through libjpeg-turbo with its default (Pillow's) settings: ISLOW DCT, fancy upsampling,
// gray replicated to RGB; the APP1 EXIF block gives the orientation. CMYK files are refused.
// libjpeg reports errors by longjmp, so each phase runs in a function whose locals are plain.
#include <cstdio>
#include <csetjmp>
#include <cstring>
#include <vector>

#include <jpeglib.h>

#include "vision/codecs.h"

namespace flashserve::vision::internal {
namespace {

struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
};

void OnError(j_common_ptr info) {
  auto* err = reinterpret_cast<ErrorManager*>(info->err);
  info->err->format_message(info, err->message);
  std::longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr, int) {}

bool ReadHeader(jpeg_decompress_struct* info, ErrorManager* err, std::span<const uint8_t> bytes, bool markers) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  if (markers) jpeg_save_markers(info, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(info, TRUE);
  return true;
}

bool ReadPixels(jpeg_decompress_struct* info, ErrorManager* err, uint8_t* out) {
  if (setjmp(err->jump)) return false;
  info->out_color_space = JCS_RGB;
  jpeg_start_decompress(info);
  const size_t stride = static_cast<size_t>(info->output_width) * 3;
  while (info->output_scanline < info->output_height) {
    JSAMPROW row = out + info->output_scanline * stride;
    jpeg_read_scanlines(info, &row, 1);
  }
  jpeg_finish_decompress(info);
  return true;
}

class JpegReader {
 public:
  JpegReader() {
    info_.err = jpeg_std_error(&err_.base);
    err_.base.error_exit = OnError;
    err_.base.emit_message = OnMessage;
    jpeg_create_decompress(&info_);
  }
  ~JpegReader() { jpeg_destroy_decompress(&info_); }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  base::Result<ImageHeader> Probe(std::span<const uint8_t> bytes) {
    if (!ReadHeader(&info_, &err_, bytes, false)) return BadImage("JPEG", err_.message);
    return ImageHeader{ImageFormat::kJpeg, static_cast<int>(info_.image_width), static_cast<int>(info_.image_height)};
  }

  base::Result<Decoded> Decode(std::span<const uint8_t> bytes) {
    if (!ReadHeader(&info_, &err_, bytes, true)) return BadImage("JPEG", err_.message);
    if (info_.jpeg_color_space == JCS_CMYK || info_.jpeg_color_space == JCS_YCCK) {
      return BadImage("JPEG", "CMYK JPEG files are not supported; convert the picture to RGB");
    }
    Decoded out;
    // Saved markers live in the image pool, which jpeg_finish_decompress frees: read them first.
    for (jpeg_saved_marker_ptr m = info_.marker_list; m != nullptr; m = m->next) {
      if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
        out.orientation = ExifOrientation({m->data, m->data_length});
        break;
      }
    }
    out.image = RgbImage(static_cast<int>(info_.image_width), static_cast<int>(info_.image_height));
    if (!ReadPixels(&info_, &err_, out.image.pixels.data())) return BadImage("JPEG", err_.message);
    return out;
  }

 private:
  jpeg_decompress_struct info_{};
  ErrorManager err_;
};

}  // namespace

base::Result<ImageHeader> ProbeJpeg(std::span<const uint8_t> bytes) { return JpegReader().Probe(bytes); }

base::Result<Decoded> DecodeJpeg(std::span<const uint8_t> bytes) { return JpegReader().Decode(bytes); }

}  // namespace flashserve::vision::internal
