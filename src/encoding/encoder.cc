// Version dispatch and helpers shared by the two encoders (encoding/encoder.h).
#include "encoding/encoder.h"

#include "encoding/conversation.h"
#include "encoding/python_json.h"

namespace flashserve::encoding {

std::optional<EncodingVersion> ParseEncodingVersion(std::string_view name) {
  if (name == "v4") return EncodingVersion::kV4;
  if (name == "v41" || name == "v4.1") return EncodingVersion::kV41;
  return std::nullopt;
}

std::string_view EncodingVersionName(EncodingVersion version) {
  return version == EncodingVersion::kV4 ? "v4" : "v41";
}

std::vector<DsmlParam> ParamsFromObject(const nlohmann::ordered_json& arguments) {
  std::vector<DsmlParam> params;
  for (const auto& [key, value] : arguments.items()) {
    if (value.is_string()) {
      params.push_back({key, true, value.get<std::string>()});
    } else {
      params.push_back({key, false, PythonJsonDumps(value)});
    }
  }
  return params;
}

base::Result<EncodedPrompt> EncodeChat(const protocol::ChatRequest& request,
                                       EncodingVersion version) {
  return version == EncodingVersion::kV4 ? EncodeV4(request) : EncodeV41(request);
}

}  // namespace flashserve::encoding
