// Where image bytes come from: data URLs (base64) always; file:// URLs only under a directory the
// operator names; remote http(s) URLs reach here only when fetching is off (vision/fetch.h does
// it, ahead of the route) and are refused with a message that says how to enable it or send the
// picture instead. Pure functions apart from reading the named file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace flashserve::vision {

struct SourcePolicy {
  std::string file_root;        // empty: file:// URLs refused
  int64_t max_bytes = 20 << 20;  // encoded image size
};

// kInvalidArgument (bad or refused source), kResourceExhausted (over max_bytes), kNotFound.
base::Result<std::vector<uint8_t>> LoadImageSource(std::string_view source, const SourcePolicy& policy);

}  // namespace flashserve::vision
