// Picture source fields of a request body (protocol/image_parts.h).
#include "protocol/image_parts.h"

#include <fmt/format.h>

namespace flashserve::protocol {

namespace {

using Json = nlohmann::ordered_json;

// The string member `key` of `j`, or nullptr.
Json* StringAt(Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() && !it->get_ref<const std::string&>().empty() ? &*it : nullptr;
}

bool TypeIs(Json& part, const char* type) {
  const Json* t = StringAt(part, "type");
  return t != nullptr && *t == type;
}

// One content part: its picture's source field, or nothing when it is not a picture.
bool PartSource(Json& part, const std::string& path, ImageSourceField* out) {
  auto pick = [&](Json* value) {
    if (value == nullptr) return false;
    *out = {value, path};
    return true;
  };
  if (TypeIs(part, "image_url")) {  // Chat: {"image_url": "..."} or {"image_url": {"url": "..."}}
    auto it = part.find("image_url");
    if (it == part.end()) return false;
    if (it->is_string()) return pick(StringAt(part, "image_url"));
    return it->is_object() && pick(StringAt(*it, "url"));
  }
  if (TypeIs(part, "input_image")) {  // Responses
    return pick(StringAt(part, "image_url")) || pick(StringAt(part, "file_id"));
  }
  if (TypeIs(part, "image")) {  // Messages: {"source": {"type": "base64", "data": ...} | {"type": "url", "url": ...}}
    auto it = part.find("source");
    if (it == part.end() || !it->is_object()) return false;
    return pick(StringAt(*it, "data")) || pick(StringAt(*it, "url"));
  }
  return false;
}

void Walk(Json& content, const std::string& path, std::vector<ImageSourceField>* out) {
  if (!content.is_array()) return;
  for (size_t p = 0; p < content.size(); ++p) {
    Json& part = content[p];
    if (!part.is_object()) continue;
    const std::string part_path = fmt::format("{}[{}]", path, p);
    ImageSourceField field;
    if (PartSource(part, part_path, &field)) {
      out->push_back(std::move(field));
    } else if (TypeIs(part, "tool_result")) {
      if (auto inner = part.find("content"); inner != part.end()) Walk(*inner, part_path + ".content", out);
    }
  }
}

}  // namespace

std::vector<ImageSourceField> ImageSourceFields(Json& body) {
  std::vector<ImageSourceField> out;
  if (!body.is_object()) return out;
  for (const char* list : {"messages", "input"}) {
    auto it = body.find(list);
    if (it == body.end() || !it->is_array()) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      Json& item = (*it)[i];
      if (!item.is_object()) continue;
      if (auto content = item.find("content"); content != item.end())
        Walk(*content, fmt::format("{}[{}].content", list, i), &out);
    }
  }
  return out;
}

std::vector<std::string> ImageSources(const Json& body) {
  std::vector<std::string> out;  // the walk only reads here; it hands out mutable fields for callers that write
  for (const ImageSourceField& field : ImageSourceFields(const_cast<Json&>(body))) out.push_back(field.value->get<std::string>());
  return out;
}

}  // namespace flashserve::protocol
