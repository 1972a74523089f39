// The pictures of a request body as JSON, before any dialect decoding: each picture's source
// field (data URL, URL, base64 data or file id) in prompt order with its field path. Reads Chat
// Completions `messages` (image_url parts), Messages `messages` (image blocks, also inside
// tool_result content) and Responses `input` (input_image). The router places pictures on encode
// workers by these sources; workers fetch remote URLs through them. Pure functions; any thread.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashserve::protocol {

struct ImageSourceField {
  nlohmann::ordered_json* value = nullptr;  // a string: the source as sent
  std::string path;                         // its part, as image errors name it: messages[1].content[0]
};

std::vector<ImageSourceField> ImageSourceFields(nlohmann::ordered_json& body);
std::vector<std::string> ImageSources(const nlohmann::ordered_json& body);

}  // namespace flashserve::protocol
