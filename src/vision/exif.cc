// The EXIF Orientation tag through libexif (vision/codecs.h).
#include <libexif/exif-data.h>

#include <cstring>
#include <vector>

#include "vision/codecs.h"

namespace flashserve::vision::internal {

int ExifOrientation(std::span<const uint8_t> exif) {
  if (exif.empty() || exif.size() > (1u << 24)) return 1;
  // libexif wants the "Exif\0\0" header in front of the TIFF structure.
  std::vector<uint8_t> block;
  if (exif.size() < 6 || std::memcmp(exif.data(), "Exif\0\0", 6) != 0) block.assign({'E', 'x', 'i', 'f', 0, 0});
  block.insert(block.end(), exif.begin(), exif.end());
  ExifData* data = exif_data_new_from_data(block.data(), static_cast<unsigned int>(block.size()));
  if (data == nullptr) return 1;
  int orientation = 1;
  ExifEntry* entry = exif_data_get_entry(data, EXIF_TAG_ORIENTATION);
  if (entry != nullptr && entry->format == EXIF_FORMAT_SHORT && entry->components >= 1 && entry->size >= 2) {
    orientation = exif_get_short(entry->data, exif_data_get_byte_order(data));
  }
  exif_data_unref(data);
  return orientation >= 1 && orientation <= 8 ? orientation : 1;
}

}  // namespace flashserve::vision::internal
