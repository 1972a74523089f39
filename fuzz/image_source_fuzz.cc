// Image sources as clients write them (data URLs, file:// and remote URLs, anything else):
// LoadImageSource answers bytes or an error, never a crash; file:// stays refused (no root).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "vision/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flashserve::vision::SourcePolicy policy;
  policy.max_bytes = 1 << 20;
  (void)flashserve::vision::LoadImageSource(std::string_view(reinterpret_cast<const char*>(data), size), policy);
  return 0;
}
