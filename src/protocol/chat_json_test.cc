// Tests for ParseChatRequest: the happy path keeps every field (and key order), and each
// malformed field is a kBadChatRequest naming its path.
#include "protocol/chat_json.h"

#include <string>

#include <gtest/gtest.h>

namespace flashserve::protocol {
namespace {

using base::ErrorCode;

ChatRequest MustParse(const std::string& text) {
  auto result = ParseChatRequest(text);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().ToString());
  return result.ok() ? std::move(result).value() : ChatRequest{};
}

// Expects a kBadChatRequest whose message contains `fragment`.
void ExpectBad(const std::string& text, const std::string& fragment) {
  auto result = ParseChatRequest(text);
  ASSERT_FALSE(result.ok()) << "accepted: " << text;
  EXPECT_EQ(result.error().code(), ErrorCode::kBadChatRequest);
  EXPECT_NE(result.error().message().find(fragment), std::string::npos)
      << "message: " << result.error().message() << "\nexpected to contain: " << fragment;
}

TEST(ChatJsonTest, ParsesAllFields) {
  ChatRequest request = MustParse(R"({
    "model": "deepseek-v4-flash",
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                    {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                                    {"type": "input_audio", "input_audio": {}}]},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get", "arguments": "{\"q\": 1}"}},
                      {"function": {"name": "put", "arguments": {"b": 2, "a": 1}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "ok", "name": "get"},
      {"role": "developer"}
    ],
    "tools": [{"type": "function", "function": {"name": "get", "parameters": {"z": 1, "a": 2}}}],
    "tool_choice": {"type": "function", "function": {"name": "get"}},
    "response_format": {"type": "json_object"},
    "thinking": {"type": "disabled"},
    "reasoning_effort": 42
  })");
  ASSERT_EQ(request.messages.size(), 5u);
  EXPECT_EQ(request.messages[0].role, Role::kSystem);
  EXPECT_EQ(request.messages[0].content.kind, ContentKind::kText);
  EXPECT_EQ(request.messages[0].content.text, "Be brief.");
  const MessageContent& parts = request.messages[1].content;
  ASSERT_EQ(parts.kind, ContentKind::kParts);
  ASSERT_EQ(parts.parts.size(), 3u);
  EXPECT_EQ(parts.parts[0].type, PartType::kText);
  EXPECT_EQ(parts.parts[0].text, "What is this?");
  EXPECT_EQ(parts.parts[1].type, PartType::kImage);
  EXPECT_EQ(parts.parts[1].image_source, "https://x/a.png");
  EXPECT_EQ(parts.parts[2].type, PartType::kOther);
  EXPECT_EQ(parts.parts[2].type_name, "input_audio");
  const ChatMessage& assistant = request.messages[2];
  EXPECT_EQ(assistant.content.kind, ContentKind::kNull);
  EXPECT_EQ(assistant.reasoning_content, "think");
  ASSERT_EQ(assistant.tool_calls.size(), 2u);
  EXPECT_EQ(assistant.tool_calls[0].id, "call_1");
  EXPECT_EQ(assistant.tool_calls[0].arguments, "{\"q\": 1}");
  EXPECT_EQ(assistant.tool_calls[1].id, "");
  EXPECT_EQ(assistant.tool_calls[1].arguments.dump(), R"({"b":2,"a":1})");
  EXPECT_EQ(request.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(request.messages[3].name, "get");
  EXPECT_EQ(request.messages[4].role, Role::kDeveloper);
  EXPECT_EQ(request.messages[4].content.kind, ContentKind::kAbsent);
  ASSERT_EQ(request.tools.size(), 1u);
  EXPECT_EQ(request.tools[0].name, "get");
  EXPECT_EQ(request.tools[0].function.dump(), R"({"name":"get","parameters":{"z":1,"a":2}})");
  EXPECT_EQ(request.tool_choice.mode, ToolChoiceMode::kFunction);
  EXPECT_EQ(request.tool_choice.function_name, "get");
  EXPECT_EQ(request.response_format.dump(), R"({"type":"json_object"})");
  EXPECT_EQ(request.thinking, false);
  EXPECT_EQ(std::get<int64_t>(request.reasoning_effort), 42);
}

TEST(ChatJsonTest, DefaultsWhenOptionalFieldsAreAbsentOrNull) {
  ChatRequest request = MustParse(
      R"({"messages": [{"role": "user", "content": "hi"}], "tools": null, "tool_choice": null,
          "response_format": null, "thinking": null, "reasoning_effort": null})");
  EXPECT_TRUE(request.tools.empty());
  EXPECT_EQ(request.tool_choice.mode, ToolChoiceMode::kAuto);
  EXPECT_TRUE(request.response_format.is_null());
  EXPECT_FALSE(request.thinking.has_value());
  EXPECT_TRUE(std::holds_alternative<std::monostate>(request.reasoning_effort));
  request = MustParse(R"({"messages": [{"role": "user"}], "thinking": {"type": "enabled"},
                          "reasoning_effort": "max", "tools": [{"function": {"name": "f"}}],
                          "tool_choice": "required"})");
  EXPECT_EQ(request.thinking, true);
  EXPECT_EQ(std::get<std::string>(request.reasoning_effort), "max");
  EXPECT_EQ(request.tool_choice.mode, ToolChoiceMode::kRequired);
}

TEST(ChatJsonTest, ImagePartSources) {
  ChatRequest request = MustParse(R"({"messages": [{"role": "user", "content": [
      {"type": "image_url", "image_url": "data:image/png;base64,AAA"},
      {"type": "image_url", "image_url": {}},
      {"type": "image", "source": {"type": "base64", "data": "QQ"}},
      {"type": "image", "url": ""}]}]})");
  const auto& parts = request.messages[0].content.parts;
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].image_source, "data:image/png;base64,AAA");
  EXPECT_EQ(parts[1].image_source, "");
  EXPECT_EQ(parts[2].image_source, R"({"type":"base64","data":"QQ"})");
  EXPECT_EQ(parts[3].image_source, "");
}

TEST(ChatJsonTest, RejectsMalformedBodies) {
  ExpectBad("{\"messages\": [", "request body is not valid JSON");
  ExpectBad("{\"messages\": [{\"role\": \"user\", \"content\": \"a\xff\"}]}",
            "request body is not valid JSON");
  ExpectBad("[1, 2]", "request: expected a JSON object, got array");
  ExpectBad("{}", "messages: missing");
  ExpectBad(R"({"messages": {}})", "messages: expected an array, got object");
  ExpectBad(R"({"messages": []})", "messages: must not be empty");
  ExpectBad(R"({"messages": [3]})", "messages[0]: expected a message object, got number");
  // Read later with a default, these threw out of the route (a 500) before they were checked here.
  const std::string user = R"("messages": [{"role": "user", "content": "a"}])";
  ExpectBad("{" + user + R"(, "tools": [{"type": "function", "function": {"name": "f", "strict": "yes"}}]})",
            "tools[0].function.strict: expected a boolean, got string");
  ExpectBad("{" + user + R"(, "tools": [{"type": "function", "function": {"name": "f"}, "namespace": {"name": 5}}]})",
            "tools[0].namespace.name: expected a string, got number");
}

TEST(ChatJsonTest, RejectsMalformedMessages) {
  ExpectBad(R"({"messages": [{"content": "x"}]})", "messages[0].role: missing");
  ExpectBad(R"({"messages": [{"role": 7}]})", "messages[0].role: expected a string, got number");
  ExpectBad(R"({"messages": [{"role": "function"}]})", "messages[0].role: unknown role 'function'");
  ExpectBad(R"({"messages": [{"role": "user", "content": 5}]})",
            "messages[0].content: expected a string, an array of content parts or null");
  ExpectBad(R"({"messages": [{"role": "user", "content": ["hi"]}]})",
            "messages[0].content[0]: expected a content part object, got string");
  ExpectBad(R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})",
            "messages[0].content[0].type: missing");
  ExpectBad(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
            "messages[0].content[0].text: missing");
  ExpectBad(
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": 3}]}]})",
      "messages[0].content[0].image_url: expected a string or an object, got number");
  ExpectBad(
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": 1}}]}]})",
      "messages[0].content[0].image_url.url: expected a string");
  ExpectBad(R"({"messages": [{"role": "assistant", "reasoning_content": 1}]})",
            "messages[0].reasoning_content: expected a string, got number");
  ExpectBad(R"({"messages": [{"role": "tool", "tool_call_id": []}]})",
            "messages[0].tool_call_id: expected a string, got array");
  ExpectBad(R"({"messages": [{"role": "user", "name": false}]})",
            "messages[0].name: expected a string");
}

TEST(ChatJsonTest, RejectsMalformedToolCalls) {
  const std::string head = R"({"messages": [{"role": "assistant", "tool_calls": )";
  ExpectBad(head + R"("x"}]})", "messages[0].tool_calls: expected an array, got string");
  ExpectBad(head + R"([1]}]})", "messages[0].tool_calls[0]: expected a tool call object");
  ExpectBad(head + R"([{"id": 1}]}]})", "messages[0].tool_calls[0].id: expected a string");
  ExpectBad(head + R"([{"id": "a"}]}]})", "messages[0].tool_calls[0].function: missing");
  ExpectBad(head + R"([{"function": "f"}]}]})",
            "messages[0].tool_calls[0].function: expected an object");
  ExpectBad(head + R"([{"function": {"arguments": "{}"}}]}]})",
            "messages[0].tool_calls[0].function.name: missing");
  ExpectBad(head + R"([{"function": {"name": "f"}}]}]})",
            "messages[0].tool_calls[0].function.arguments: missing");
}

TEST(ChatJsonTest, RejectsMalformedTools) {
  const std::string head = R"({"messages": [{"role": "user"}], )";
  ExpectBad(head + R"("tools": {}})", "tools: expected an array, got object");
  ExpectBad(head + R"("tools": [1]})", "tools[0]: expected a tool object");
  ExpectBad(head + R"("tools": [{"type": "web_search"}]})",
            "tools[0].type: unsupported tool type 'web_search'");
  ExpectBad(head + R"("tools": [{"type": "function"}]})", "tools[0].function: missing");
  ExpectBad(head + R"("tools": [{"function": []}]})",
            "tools[0].function: expected an object, got array");
  ExpectBad(head + R"("tools": [{"function": {"name": 1}}]})",
            "tools[0].function.name: expected a string");
}

TEST(ChatJsonTest, RejectsMalformedOptions) {
  const std::string head = R"({"messages": [{"role": "user"}], )";
  ExpectBad(head + R"("tool_choice": "always"})", "tool_choice: unknown value 'always'");
  ExpectBad(head + R"("tool_choice": "required"})",
            "tool_choice: \"required\" needs a non-empty tools list");
  ExpectBad(head + R"("tool_choice": 3})",
            "tool_choice: expected a string or an object, got number");
  ExpectBad(head + R"("tool_choice": {"type": "function"}})", "tool_choice.function: missing");
  ExpectBad(
      head +
          R"("tools": [{"function": {"name": "a"}}], "tool_choice": {"function": {"name": "b"}}})",
      "tool_choice.function.name: tool 'b' is not in the tools list");
  ExpectBad(head + R"("response_format": "json"})",
            "response_format: expected an object, got string");
  ExpectBad(head + R"("response_format": {}})", "response_format.type: missing");
  ExpectBad(head + R"("response_format": {"type": "yaml"}})",
            "response_format.type: unknown type 'yaml'");
  ExpectBad(head + R"("response_format": {"type": "json_schema"}})",
            "response_format.json_schema: missing");
  ExpectBad(head + R"("thinking": true})", "thinking: expected an object, got boolean");
  ExpectBad(head + R"("thinking": {"type": "auto"}})", "thinking.type: unknown value 'auto'");
  ExpectBad(head + R"("reasoning_effort": 1.5})",
            "reasoning_effort: expected a string or an integer, got number");
  ExpectBad(head + R"("reasoning_effort": true})",
            "reasoning_effort: expected a string or an integer, got boolean");
  ExpectBad(head + R"("reasoning_effort": 18446744073709551615})",
            "reasoning_effort: integer out of range");
}

TEST(ChatJsonTest, RoleNamesRoundTrip) {
  for (Role role : {Role::kSystem, Role::kDeveloper, Role::kUser, Role::kAssistant, Role::kTool,
                    Role::kLatestReminder}) {
    EXPECT_EQ(RoleFromName(RoleName(role)), role);
  }
  EXPECT_FALSE(RoleFromName("System").has_value());
}

}  // namespace
}  // namespace flashserve::protocol
