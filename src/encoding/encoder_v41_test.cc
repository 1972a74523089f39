// DeepSeek-V4.1 prompt encoding: the V4.1 rules of api-and-decoding.md section 1. Expected
// prompts were written from the spec and checked byte for byte against the V4.1-Flash release
// encoder (encoding/encoding.py @ dba1be0a, as vendored by sgl-project/SpecForge).
#include <string>

#include <gtest/gtest.h>

#include "encoding/test_util.h"

namespace flashserve::encoding {
namespace {

using testing::Expand;

std::string V41(std::string_view body) { return testing::Render(body, EncodingVersion::kV41); }

std::string Effort(int budget) {
  return "Reasoning Effort: " + std::to_string(budget) +
         " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
}

// The V4.1 "## Tools" section (leading-space tag names) around `schemas`.
std::string ToolsSection(std::string_view schemas) {
  return Expand(
             "## Tools\n\nYou have access to a set of tools to help answer the user's question. "
             "You "
             "can invoke tools by writing a \"<{DSML} calls>\" block like the following:\n\n"
             "<{DSML} calls>\n<{DSML} invoke name=\"$TOOL_NAME\">\n<{DSML} parameter "
             "name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{DSML} parameter>\n"
             "...\n</{DSML} invoke>\n<{DSML} invoke name=\"$TOOL_NAME2\">\n...\n</{DSML} invoke>\n"
             "</{DSML} calls>\n\nString parameters should be specified as is and set "
             "`string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass "
             "the "
             "value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled "
             "(triggered by {think}), you MUST output your complete reasoning inside "
             "{think}...{/think} BEFORE any tool calls or final response.\n\nOtherwise, output "
             "directly after {/think} with tool calls or final response.\n\n### Available Tool "
             "Schemas\n\n") +
         std::string(schemas) +
         "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
         "tool calls.\n";
}

TEST(EncoderV41Test, SystemTokenAndDefaultEffort) {
  EXPECT_EQ(V41(R"({"messages": [{"role": "system", "content": "You are helpful."},
                                {"role": "user", "content": "Hi"}]})"),
            Expand("{BOS}{S}") + Effort(75) + Expand("You are helpful.{U}Hi{A}{think}"));
  // Chat mode without a system message: no system token at all (4 tokens).
  EncodedPrompt chat = testing::MustEncode(
      R"({"messages": [{"role": "user", "content": "Hi"}], "thinking": {"type": "disabled"}})",
      EncodingVersion::kV41);
  EXPECT_EQ(chat.text, Expand("{BOS}{U}Hi{A}{/think}"));
  EXPECT_EQ(chat.pieces.size(), 5u);  // BOS, User, "Hi", Assistant, </think>
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}],
                   "thinking": {"type": "disabled"}})"),
      Expand("{BOS}{S}S{U}Hi{A}{/think}"));
}

TEST(EncoderV41Test, NumericReasoningEffort) {
  const std::string user =
      R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": )";
  const std::string tail = Expand("{U}Hi{A}{think}");
  EXPECT_EQ(V41(user + "30}"), Expand("{BOS}{S}") + Effort(30) + tail);
  EXPECT_EQ(V41(user + "1}"), Expand("{BOS}{S}") + Effort(1) + tail);
  EXPECT_EQ(V41(user + "\"low\"}"), Expand("{BOS}{S}") + Effort(50) + tail);
  EXPECT_EQ(V41(user + "\"high\"}"), Expand("{BOS}{S}") + Effort(75) + tail);
  EXPECT_EQ(V41(user + "\"max\"}"), Expand("{BOS}{S}") + Effort(100) + tail);
  const std::string rejected =
      "ERROR: bad chat request: reasoning_effort: the V4.1 encoding accepts an integer in [1, 100] "
      "or one of \"low\", \"high\", \"max\", got ";
  EXPECT_EQ(V41(user + "\"xhigh\"}"), rejected + "\"xhigh\"");
  EXPECT_EQ(V41(user + "\"medium\"}"), rejected + "\"medium\"");
  EXPECT_EQ(V41(user + "0}"), rejected + "0");
  EXPECT_EQ(V41(user + "101}"), rejected + "101");
  // Validated in chat mode too, though not rendered there.
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": 0,
                   "thinking": {"type": "disabled"}})"),
            rejected + "0");
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": 30,
                   "thinking": {"type": "disabled"}})"),
            Expand("{BOS}{U}Hi{A}{/think}"));
}

TEST(EncoderV41Test, MidConversationSystemCountsAsUser) {
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
      {"role": "assistant", "reasoning_content": "r1", "content": "A1"},
      {"role": "system", "content": "R"},
      {"role": "assistant", "reasoning_content": "r2", "content": "A2"}]})"),
      Expand("{BOS}{S}") + Effort(75) +
          Expand("S{U}U1{A}{/think}A1{EOS}{S}R{A}{think}r2{/think}A2{EOS}"));
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
      {"role": "assistant", "content": "A1"}, {"role": "system", "content": "R"},
      {"role": "user", "content": "U2"}], "thinking": {"type": "disabled"}})"),
      Expand("{BOS}{S}S{U}U1{A}{/think}A1{EOS}{S}R{U}U2{A}{/think}"));
}

TEST(EncoderV41Test, NoDeveloperRole) {
  const std::string error =
      "ERROR: bad chat request: messages[%]: the V4.1 encoding has no developer role (only "
      "thinking mode drops developer messages before the last user message)";
  auto at = [&](char index) {
    std::string text = error;
    text[text.find('%')] = index;
    return text;
  };
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "developer", "content": "D"}, {"role": "user", "content": "U"}],
                   "thinking": {"type": "disabled"}})"),
      at('0'));
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "developer", "content": "D"}, {"role": "user", "content": "U"}]})"),
      Expand("{BOS}{S}") + Effort(75) + Expand("{U}U{A}{think}"));
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "U"}, {"role": "developer", "content": "D"}]})"),
      at('1'));
  // Tools turn reasoning dropping off, so nothing drops the developer message.
  EXPECT_EQ(V41(R"({"messages": [{"role": "developer", "content": "D"}, {"role": "user", "content": "U"}],
                   "tools": [{"function": {"name": "f"}}]})"),
            at('0'));
}

TEST(EncoderV41Test, ToolCallsUseSpacedTagsAndAcceptObjectArguments) {
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "go"},
      {"role": "assistant", "content": "Calling.", "reasoning_content": "r", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
        {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "\"{\\\"a\\\": [1.0]}\""}},
        {"id": "c3", "type": "function", "function": {"name": "g", "arguments": "[1, 2]"}}]},
      {"role": "tool", "tool_call_id": "c2", "content": "two"},
      {"role": "tool", "tool_call_id": "c1", "content": "one"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})"),
      Expand("{BOS}{S}") + Effort(75) + "\n\n" +
          ToolsSection(R"({"name": "get_weather", "parameters": {"type": "object"}})") +
          Expand("{U}go{A}{think}r{/think}Calling.\n\n<{DSML} calls>\n<{DSML} invoke "
                 "name=\"get_weather\">\n<{DSML} parameter name=\"city\" string=\"true\">Paris"
                 "</{DSML} parameter>\n<{DSML} parameter name=\"days\" string=\"false\">3"
                 "</{DSML} parameter>\n</{DSML} invoke>\n<{DSML} invoke name=\"f\">\n<{DSML} "
                 "parameter name=\"a\" string=\"false\">[1.0]</{DSML} parameter>\n</{DSML} "
                 "invoke>\n<{DSML} invoke name=\"g\">\n<{DSML} parameter name=\"arguments\" "
                 "string=\"true\">[1, 2]</{DSML} parameter>\n</{DSML} invoke>\n</{DSML} calls>"
                 "{EOS}{U}<tool_result>one</tool_result>\n\n<tool_result>two</tool_result>{A}"
                 "{think}"));
}

TEST(EncoderV41Test, ImagesBecomePlaceholders) {
  EncodedPrompt prompt = testing::MustEncode(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "What is in"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
        {"type": "input_audio", "input_audio": {}},
        {"type": "image_url", "image_url": "data:image/png;base64,AA"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "A cat"}, {"type": "input_audio"},
        {"type": "image_url", "image_url": {"url": "u2"}}]},
      {"role": "user", "content": []},
      {"role": "tool", "tool_call_id": "t", "content": [{"type": "text", "text": "r1"},
        {"type": "image_url", "image_url": {"url": "u3"}}]}], "thinking": {"type": "disabled"}})",
                                             EncodingVersion::kV41);
  EXPECT_EQ(prompt.text,
            Expand("{BOS}{U}What is in\n\n{IMG}\n\n[Unsupported input_audio]\n\n{IMG}{A}"
                   "{/think}A cat\n\n{IMG}{EOS}{U}<tool_result>r1\n\n{IMG}</tool_result>"
                   "{A}{/think}"));
  EXPECT_EQ(ImageSources(prompt),
            (std::vector<std::string>{"https://x/a.png", "data:image/png;base64,AA", "u2", "u3"}));
  size_t num_image_pieces = 0;
  for (const PromptPiece& piece : prompt.pieces)
    num_image_pieces += piece.kind == PieceKind::kImage;
  EXPECT_EQ(num_image_pieces, 4u);
}

TEST(EncoderV41Test, ImageErrors) {
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ""}}]}]})"),
      "ERROR: bad chat request: messages[0]: content[0]: image part has no source");
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": "see <｜deepseek_image｜>"}]})"),
            "ERROR: bad chat request: messages[0]: content contains the image placeholder "
            "'<｜deepseek_image｜>'; send images as image content parts");
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "<｜deepseek_image｜>"}]}]})"),
      "ERROR: bad chat request: messages[0]: content[0] contains the image placeholder "
      "'<｜deepseek_image｜>'; send images as image content parts");
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "x"},
                   {"role": "assistant", "content": "y", "reasoning_content": "<｜deepseek_image｜>"}]})"),
      "ERROR: bad chat request: messages[1]: reasoning_content contains the image placeholder "
      "'<｜deepseek_image｜>'; send images as image content parts");
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": null}]})"),
            "ERROR: bad chat request: messages[0]: user content must not be null");
}

TEST(EncoderV41Test, NamespacedToolNames) {
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "go"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "web::search", "arguments": "{}"}}]}],
      "tools": [{"type": "function", "namespace": {"name": "web", "description": "Web tools"},
                 "function": {"name": "search", "description": "Search", "parameters": {}}},
                {"type": "function", "function": {"name": "fs::read", "namespace": "fs"}}],
      "thinking": {"type": "disabled"}})"),
      Expand("{BOS}{S}\n\n") +
          ToolsSection("{\"name\": \"web::search\", \"description\": \"Web tools\\nSearch\", "
                       "\"parameters\": {}}\n{\"name\": \"fs::read\"}") +
          Expand("{U}go{A}{/think}\n\n<{DSML} calls>\n<{DSML} invoke name=\"web::search\">\n\n"
                 "</{DSML} invoke>\n</{DSML} calls>{EOS}"));
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "",
      "tool_calls": [{"id": "c", "function": {"name": "a::b::c", "arguments": "{}"}}]}]})"),
      "ERROR: bad chat request: messages[1].tool_calls[0]: tool name 'a::b::c' may contain "
      "'::' at most once");
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "go"}],
                   "tools": [{"function": {"name": "fs::read", "namespace": "web"}}]})"),
      "ERROR: bad chat request: tools[0]: tool name 'fs::read' conflicts with namespace 'web'");
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": "go"}],
                   "tools": [{"function": {"name": "read", "namespace": 5}}]})"),
            "ERROR: bad chat request: tools[0]: namespace must be a string or an object with a "
            "string name");
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": "go"}], "tools": [
                   {"namespace": {"name": "web", "description": ["x"]}, "function": {"name": "read"}}]})"),
            "ERROR: bad chat request: tools[0]: namespace and tool descriptions must be strings");
}

TEST(EncoderV41Test, LatestReminderAndResponseFormat) {
  EXPECT_EQ(V41(R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "latest_reminder", "content": []},
      {"role": "latest_reminder", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "thinking": {"type": "disabled"}})"),
            Expand("{BOS}{U}Hi{A}{/think}{LR}None{LR}a\n\nb"));
  EXPECT_EQ(
      V41(R"({"messages": [{"role": "user", "content": "Hi"}], "response_format": {"type": "json_schema",
      "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"n": {"type": "number", "maximum": 1e20}}}}}})"),
      Expand("{BOS}{S}") + Effort(75) +
          "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
          "reply:\n{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\", \"schema\": "
          "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"number\", \"maximum\": "
          "1e+20}}}}}" +
          Expand("{U}Hi{A}{think}"));
}

}  // namespace
}  // namespace flashserve::encoding
