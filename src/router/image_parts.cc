// Picture sources of a request body (router/image_parts.h).
#include "router/image_parts.h"

namespace flashserve::router {

namespace {

using Json = nlohmann::ordered_json;

std::string StringAt(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One content part: a picture's source, or "" when it is not a picture.
std::string PartSource(const Json& part) {
  const std::string type = StringAt(part, "type");
  if (type == "image_url") {  // Chat: {"image_url": "..."} or {"image_url": {"url": "..."}}
    auto it = part.find("image_url");
    if (it == part.end()) return "";
    return it->is_string() ? it->get<std::string>() : it->is_object() ? StringAt(*it, "url") : "";
  }
  if (type == "input_image") {  // Responses
    std::string url = StringAt(part, "image_url");
    return url.empty() ? StringAt(part, "file_id") : url;
  }
  if (type == "image") {  // Messages: {"source": {"type": "base64", "data": ...} | {"type": "url", "url": ...}}
    auto it = part.find("source");
    if (it == part.end() || !it->is_object()) return "";
    std::string data = StringAt(*it, "data");
    return data.empty() ? StringAt(*it, "url") : data;
  }
  return "";
}

void Walk(const Json& content, std::vector<std::string>* out) {
  if (!content.is_array()) return;
  for (const Json& part : content) {
    if (!part.is_object()) continue;
    if (std::string source = PartSource(part); !source.empty()) {
      out->push_back(std::move(source));
    } else if (StringAt(part, "type") == "tool_result") {
      if (auto inner = part.find("content"); inner != part.end()) Walk(*inner, out);
    }
  }
}

}  // namespace

std::vector<std::string> ImageSources(const Json& body) {
  std::vector<std::string> out;
  if (!body.is_object()) return out;
  for (const char* list : {"messages", "input"}) {
    auto it = body.find(list);
    if (it == body.end() || !it->is_array()) continue;
    for (const Json& item : *it) {
      if (!item.is_object()) continue;
      if (auto content = item.find("content"); content != item.end()) Walk(*content, &out);
    }
  }
  return out;
}

}  // namespace flashserve::router
