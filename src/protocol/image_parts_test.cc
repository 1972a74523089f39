// ImageSources: every dialect's picture parts in prompt order (Chat image_url as a string or an
// object, Responses input_image by URL or file id, Messages image blocks by data or URL, also
// inside tool_result), and nothing for text, malformed parts or other fields.
#include "protocol/image_parts.h"

#include <gtest/gtest.h>

namespace flashserve::protocol {
namespace {

using Json = nlohmann::ordered_json;
using Sources = std::vector<std::string>;

TEST(ImageSources, ChatPartsInOrder) {
  const Json body = Json::parse(R"({"messages": [
    {"role": "system", "content": "no pictures here"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:1"}}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": "data:2"}, {"type": "image_url"}]}]})");
  EXPECT_EQ(ImageSources(body), (Sources{"data:1", "data:2"}));
}

TEST(ImageSources, ResponsesInputImages) {
  const Json body = Json::parse(R"({"input": [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"},
      {"type": "input_image", "image_url": "data:r1"}, {"type": "input_image", "file_id": "file-9"}]}]})");
  EXPECT_EQ(ImageSources(body), (Sources{"data:r1", "file-9"}));
  EXPECT_TRUE(ImageSources(Json::parse(R"({"input": "just text"})")).empty());
}

TEST(ImageSources, MessagesBlocksAndToolResults) {
  const Json body = Json::parse(R"({"messages": [
    {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
      {"type": "text", "text": "shot"}, {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}]}]})");
  EXPECT_EQ(ImageSources(body), (Sources{"AAA", "https://x/y.png"}));
}

TEST(ImageSources, NothingFromOtherShapes) {
  EXPECT_TRUE(ImageSources(Json::parse(R"([1, 2])")).empty());
  EXPECT_TRUE(ImageSources(Json::parse(R"({"messages": "x"})")).empty());
  EXPECT_TRUE(ImageSources(Json::parse(R"({"messages": [1, {"content": [3, {"type": "image"}]}]})")).empty());
  EXPECT_TRUE(ImageSources(Json::parse(R"({"prompt": "data:image/png;base64,AAAA"})")).empty());
}

TEST(ImageSourceFields, PathsNameThePartAndValuesAreTheBodys) {
  Json body = Json::parse(R"({"messages": [
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "https://a"}},
                                 {"type": "image_url", "image_url": "https://b"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
      {"type": "image", "source": {"type": "url", "url": "https://c"}}]}]}],
    "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://d"}]}]})");
  std::vector<ImageSourceField> fields = ImageSourceFields(body);
  ASSERT_EQ(fields.size(), 4u);
  EXPECT_EQ(fields[0].path, "messages[0].content[1]");
  EXPECT_EQ(fields[1].path, "messages[0].content[2]");
  EXPECT_EQ(fields[2].path, "messages[1].content[0].content[0]");
  EXPECT_EQ(fields[3].path, "input[0].content[0]");
  *fields[1].value = "data:image/png;base64,AAAA";  // the fields are the body's own
  EXPECT_EQ(body["messages"][0]["content"][2]["image_url"], "data:image/png;base64,AAAA");
}

}  // namespace
}  // namespace flashserve::protocol
