// Format sniffing, limits and dispatch to the codecs (vision/decode.h).
#include "vision/decode.h"

#include <cstring>

#include <fmt/format.h>

#include "vision/codecs.h"
#include "vision/resample.h"

namespace flashserve::vision {

using base::ErrorCode;

std::string_view FormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
  }
  return "image";
}

namespace internal {

base::Error BadImage(std::string_view format, std::string_view why) {
  return base::MakeError(ErrorCode::kInvalidArgument, fmt::format("not a readable {} image: {}", format, why));
}

}  // namespace internal

namespace {

bool StartsWith(std::span<const uint8_t> bytes, size_t offset, std::string_view magic) {
  return bytes.size() >= offset + magic.size() && std::memcmp(bytes.data() + offset, magic.data(), magic.size()) == 0;
}

base::Result<ImageFormat> Sniff(std::span<const uint8_t> bytes) {
  if (StartsWith(bytes, 0, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (StartsWith(bytes, 0, "\xFF\xD8\xFF")) return ImageFormat::kJpeg;
  if (StartsWith(bytes, 0, "RIFF") && StartsWith(bytes, 8, "WEBP")) return ImageFormat::kWebp;
  if (StartsWith(bytes, 0, "GIF87a") || StartsWith(bytes, 0, "GIF89a")) return ImageFormat::kGif;
  if (StartsWith(bytes, 0, "BM")) return ImageFormat::kBmp;
  return base::MakeError(ErrorCode::kInvalidArgument,
                         "unrecognised image data: supported formats are PNG, JPEG, WebP, GIF and BMP");
}

}  // namespace

base::Result<ImageHeader> ProbeImage(std::span<const uint8_t> bytes) {
  FS_ASSIGN_OR_RETURN(ImageFormat format, Sniff(bytes));
  base::Result<ImageHeader> header = [&]() {
    switch (format) {
      case ImageFormat::kPng: return internal::ProbePng(bytes);
      case ImageFormat::kJpeg: return internal::ProbeJpeg(bytes);
      case ImageFormat::kWebp: return internal::ProbeWebp(bytes);
      case ImageFormat::kGif: return internal::ProbeGif(bytes);
      case ImageFormat::kBmp: return internal::ProbeBmp(bytes);
    }
    return base::Result<ImageHeader>(internal::BadImage("image", "unknown format"));
  }();
  if (header.ok() && (header->width <= 0 || header->height <= 0)) {
    return internal::BadImage(FormatName(format), "the header gives an empty size");
  }
  return header;
}

base::Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return base::MakeError(ErrorCode::kResourceExhausted, fmt::format("the image is {} bytes, over the limit of {}",
                                                                      bytes.size(), limits.max_bytes));
  }
  FS_ASSIGN_OR_RETURN(ImageHeader header, ProbeImage(bytes));
  const int64_t pixels = static_cast<int64_t>(header.width) * header.height;
  if (pixels > limits.max_pixels) {
    return base::MakeError(ErrorCode::kResourceExhausted,
                           fmt::format("the image is {}x{} = {} pixels, over the limit of {}", header.width,
                                       header.height, pixels, limits.max_pixels));
  }
  base::Result<internal::Decoded> decoded = [&]() {
    switch (header.format) {
      case ImageFormat::kPng: return internal::DecodePng(bytes);
      case ImageFormat::kJpeg: return internal::DecodeJpeg(bytes);
      case ImageFormat::kWebp: return internal::DecodeWebp(bytes);
      case ImageFormat::kGif: return internal::DecodeGif(bytes);
      case ImageFormat::kBmp: return internal::DecodeBmp(bytes);
    }
    return base::Result<internal::Decoded>(internal::BadImage("image", "unknown format"));
  }();
  if (!decoded.ok()) return decoded.error();
  if (decoded->image.width != header.width || decoded->image.height != header.height) {
    return internal::BadImage(FormatName(header.format), "decoded size differs from the header");
  }
  return ApplyOrientation(decoded->image, decoded->orientation);
}

}  // namespace flashserve::vision
