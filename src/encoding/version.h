// The DeepSeek prompt-format versions this room speaks. Shared by the encoders, the DSML
// helpers and the output parser. Pure functions, any thread.
#pragma once

#include <optional>
#include <string_view>

namespace flashserve::encoding {

enum class EncodingVersion {
  kV4,   // DeepSeek-V4-Flash / V4-Pro (encoding_dsv4.py)
  kV41,  // DeepSeek-V4.1-Flash (encoding/encoding.py of that release)
};

// "v4" / "v41" (also "v4.1").
std::optional<EncodingVersion> ParseEncodingVersion(std::string_view name);
std::string_view EncodingVersionName(EncodingVersion version);

}  // namespace flashserve::encoding
