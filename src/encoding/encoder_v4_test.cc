// DeepSeek-V4 prompt encoding: one test per rule of api-and-decoding.md section 1 (V4 side).
// Expected prompts were written from the spec and checked byte for byte against the reference
// encoder (sglang encoding_dsv4.py @ 00370f27, same logic as the V4 model repos).
#include <string>

#include <gtest/gtest.h>

#include "encoding/test_util.h"

namespace flashserve::encoding {
namespace {

using testing::Expand;

std::string V4(std::string_view body) { return testing::Render(body, EncodingVersion::kV4); }

// The V4 "## Tools" section around `schemas`, typed from api-and-decoding.md 1.4.
std::string ToolsSection(std::string_view schemas) {
  return Expand(
             "## Tools\n\nYou have access to a set of tools to help answer the user's question. "
             "You "
             "can invoke tools by writing a \"<{DSML}tool_calls>\" block like the following:\n\n"
             "<{DSML}tool_calls>\n<{DSML}invoke name=\"$TOOL_NAME\">\n<{DSML}parameter "
             "name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{DSML}parameter>\n"
             "...\n</{DSML}invoke>\n<{DSML}invoke name=\"$TOOL_NAME2\">\n...\n</{DSML}invoke>\n"
             "</{DSML}tool_calls>\n\nString parameters should be specified as is and set "
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

TEST(EncoderV4Test, ChatModeSystemAndUser) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "system", "content": "You are helpful."},
                               {"role": "user", "content": "Hi"}],
                  "thinking": {"type": "disabled"}})"),
            Expand("{BOS}You are helpful.{U}Hi{A}{/think}"));
}

TEST(EncoderV4Test, ThinkingIsTheDefaultAndDropsEarlierReasoning) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "hello"},
      {"role": "assistant", "content": "Hello! I am DeepSeek.", "reasoning_content": "thinking..."},
      {"role": "user", "content": "1+1=?"}]})"),
            Expand("{BOS}{U}hello{A}{/think}Hello! I am DeepSeek.{EOS}{U}1+1=?{A}{think}"));
}

TEST(EncoderV4Test, ReasoningAfterTheLastUserTurnIsKept) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Q1"},
      {"role": "assistant", "reasoning_content": "old", "content": "A1"},
      {"role": "user", "content": "Q2"},
      {"role": "assistant", "reasoning_content": "new", "content": "A2"}]})"),
            Expand("{BOS}{U}Q1{A}{/think}A1{EOS}{U}Q2{A}{think}new{/think}A2{EOS}"));
}

TEST(EncoderV4Test, ToolsDisableDropThinking) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Q1"},
      {"role": "assistant", "reasoning_content": "old", "content": "A1"},
      {"role": "user", "content": "Q2"}],
      "tools": [{"type": "function", "function": {"name": "now", "parameters": {}}}]})"),
            Expand("{BOS}\n\n") + ToolsSection(R"({"name": "now", "parameters": {}})") +
                Expand("{U}Q1{A}{think}old{/think}A1{EOS}{U}Q2{A}{think}"));
}

TEST(EncoderV4Test, ToolChoiceNoneHidesToolsAndKeepsDropThinking) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Q1"},
      {"role": "assistant", "reasoning_content": "old", "content": "A1"},
      {"role": "user", "content": "Q2"}],
      "tools": [{"type": "function", "function": {"name": "now", "parameters": {}}}],
      "tool_choice": "none"})"),
            Expand("{BOS}{U}Q1{A}{/think}A1{EOS}{U}Q2{A}{think}"));
}

TEST(EncoderV4Test, ReasoningOfToolTurnsIsDroppedWithoutTools) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "reasoning_content": "need tool", "content": "",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "assistant", "reasoning_content": "got it", "content": "Sunny."},
      {"role": "user", "content": "Thanks"}]})"),
            Expand("{BOS}{U}Weather?{A}{/think}\n\n<{DSML}tool_calls>\n<{DSML}invoke "
                   "name=\"get_weather\">\n<{DSML}parameter name=\"city\" string=\"true\">Paris"
                   "</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}tool_calls>{EOS}{U}<tool_result>"
                   "sunny</tool_result>{A}{/think}Sunny.{EOS}{U}Thanks{A}{think}"));
}

TEST(EncoderV4Test, DeveloperIsDroppedInThinkingModeAndRenderedInChatMode) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "developer", "content": "Dev rules"},
      {"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"},
      {"role": "user", "content": "Q2"}]})"),
            Expand("{BOS}{U}Q1{A}{/think}A1{EOS}{U}Q2{A}{think}"));
  EXPECT_EQ(V4(R"({"messages": [{"role": "developer", "content": "Dev rules"},
      {"role": "user", "content": "Q1"}], "thinking": {"type": "disabled"}})"),
            Expand("{BOS}{U}Dev rules{U}Q1{A}{/think}"));
  // A dropped developer message is never checked; a rendered empty one is an error.
  EXPECT_EQ(V4(R"({"messages": [{"role": "developer"}, {"role": "user", "content": "Q"}]})"),
            Expand("{BOS}{U}Q{A}{think}"));
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "Q1"}, {"role": "developer", "content": ""}],
                  "thinking": {"type": "disabled"}})"),
      "ERROR: bad chat request: messages[1]: a developer message needs non-empty content");
}

TEST(EncoderV4Test, ToolResultsMergeIntoOneUserTurnInCallOrder) {
  // Calls a, b; results arrive b, x (unknown id), a; then a user message joins the same turn.
  // Sort key: position of the call (unknown ids count as the first call), stable.
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "Do both"},
      {"role": "assistant", "content": "", "tool_calls": [
          {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
          {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "b", "content": "B"},
      {"role": "tool", "tool_call_id": "x", "content": "X"},
      {"role": "tool", "tool_call_id": "a", "content": "A"},
      {"role": "user", "content": "and?"}], "thinking": {"type": "disabled"}})"),
      Expand("{BOS}{U}Do both{A}{/think}\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n\n"
             "</{DSML}invoke>\n<{DSML}invoke name=\"g\">\n\n</{DSML}invoke>\n</{DSML}tool_calls>"
             "{EOS}{U}<tool_result>X</tool_result>\n\n<tool_result>A</tool_result>\n\n"
             "<tool_result>B</tool_result>\n\nand?{A}{/think}"));
}

TEST(EncoderV4Test, StringParametersAreRawAndOthersPythonJson) {
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "go"},
      {"role": "assistant", "content": "Calling.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments":
          "{\"city\": \"Paris \\\"<b>\\\"\\nFR\", \"days\": 3, \"ratio\": 1e4, \"tiny\": 1E-7, \"opts\": {\"unit\": \"°C\", \"list\": [true, null, 2.50]}}"}},
        {"type": "function", "function": {"name": "now", "arguments": "{}"}}]}],
      "thinking": {"type": "disabled"}})"),
      Expand("{BOS}{U}go{A}{/think}Calling.\n\n<{DSML}tool_calls>\n<{DSML}invoke "
             "name=\"get_weather\">\n<{DSML}parameter name=\"city\" string=\"true\">Paris "
             "\"<b>\"\nFR</{DSML}parameter>\n<{DSML}parameter name=\"days\" string=\"false\">3"
             "</{DSML}parameter>\n<{DSML}parameter name=\"ratio\" string=\"false\">10000.0"
             "</{DSML}parameter>\n<{DSML}parameter name=\"tiny\" string=\"false\">1e-07"
             "</{DSML}parameter>\n<{DSML}parameter name=\"opts\" string=\"false\">{\"unit\": "
             "\"°C\", \"list\": [true, null, 2.5]}</{DSML}parameter>\n</{DSML}invoke>\n"
             "<{DSML}invoke name=\"now\">\n\n</{DSML}invoke>\n</{DSML}tool_calls>{EOS}"));
}

TEST(EncoderV4Test, ArgumentsThatAreNotAJsonStringAreWrapped) {
  const std::string head = R"({"thinking": {"type": "disabled"}, "messages": [
      {"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [
      {"id": "c", "type": "function", "function": {"name": "f", "arguments": )";
  const std::string wrapped =
      "{BOS}{U}go{A}{/think}\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n"
      "<{DSML}parameter name=\"arguments\" string=\"%s\">%s</{DSML}parameter>\n"
      "</{DSML}invoke>\n</{DSML}tool_calls>{EOS}";
  auto expected = [&](std::string_view is_string, std::string_view value) {
    std::string text = wrapped;
    text.replace(text.find("%s"), 2, is_string);
    text.replace(text.find("%s"), 2, value);
    return Expand(text);
  };
  // An object (the "history tool-call" case) becomes one parameter holding its JSON.
  EXPECT_EQ(V4(head + R"({"city": "Paris", "n": 1}}}]}]})"),
            expected("false", R"({"city": "Paris", "n": 1})"));
  EXPECT_EQ(V4(head + R"("city=Paris"}}]}]})"), expected("true", "city=Paris"));
  EXPECT_EQ(V4(head + R"(null}}]}]})"), expected("false", "null"));
  // JSON that is not an object (e.g. double-encoded arguments) fails in the reference.
  EXPECT_EQ(V4(head + R"("\"{\\\"a\\\": 1}\""}}]}]})"),
            "ERROR: bad chat request: messages[1]: tool call 'f': arguments decode to a JSON "
            "string, not an object");
  EXPECT_EQ(V4(head + R"("[1, 2]"}}]}]})"),
            "ERROR: bad chat request: messages[1]: tool call 'f': arguments decode to a JSON "
            "array, not an object");
}

TEST(EncoderV4Test, ToolsSectionFollowsTheSystemPrompt) {
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Hi"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather ü",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
      "thinking": {"type": "disabled"}})"),
      Expand("{BOS}Sys\n\n") +
          ToolsSection(R"({"name": "get_weather", "description": "Weather ü", "parameters": )"
                       R"({"type": "object", "properties": {"city": {"type": "string"}}, )"
                       R"("required": ["city"]}})") +
          Expand("{U}Hi{A}{/think}"));
}

TEST(EncoderV4Test, ToolsAndResponseFormatGoOnAnInsertedSystemMessage) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Hi"}],
      "tools": [{"type": "function", "function": {"name": "now", "parameters": {}}}],
      "response_format": {"type": "json_object"}, "thinking": {"type": "disabled"}})"),
            Expand("{BOS}\n\n") + ToolsSection(R"({"name": "now", "parameters": {}})") +
                "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
                "reply:\n{\"type\": \"json_object\"}" +
                Expand("{U}Hi{A}{/think}"));
  // {"type": "text"} asks for nothing.
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Hi"}],
                  "response_format": {"type": "text"}, "thinking": {"type": "disabled"}})"),
            Expand("{BOS}{U}Hi{A}{/think}"));
}

TEST(EncoderV4Test, ReasoningEffort) {
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "max"})"),
            Expand("{BOS}Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST "
                   "be very thorough in your thinking and comprehensively decompose the problem to "
                   "resolve the root cause, rigorously stress-testing your logic against all "
                   "potential paths, edge cases, and adversarial scenarios.\nExplicitly write out "
                   "your entire deliberation process, documenting every intermediate step, "
                   "considered alternative, and rejected hypothesis to ensure absolutely no "
                   "assumption is left unchecked.\n\n{U}Hi{A}{think}"));
  // "max" only matters in thinking mode; "high" renders like no effort at all.
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "max",
                  "thinking": {"type": "disabled"}})"),
            Expand("{BOS}{U}Hi{A}{/think}"));
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "high"})"),
            Expand("{BOS}{U}Hi{A}{think}"));
  // Anything else is rejected, even in chat mode.
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "low",
                  "thinking": {"type": "disabled"}})"),
      "ERROR: bad chat request: reasoning_effort: the V4 encoding accepts \"high\" or \"max\" "
      "(or no value), got \"low\"");
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "xhigh"})"),
      "ERROR: bad chat request: reasoning_effort: the V4 encoding accepts \"high\" or \"max\" "
      "(or no value), got \"xhigh\"");
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": 50})"),
      "ERROR: bad chat request: reasoning_effort: the V4 encoding accepts \"high\" or \"max\" "
      "(or no value), got 50");
}

TEST(EncoderV4Test, SystemMessagesRenderInPlaceWithoutToken) {
  // Two leading system messages are concatenated; a final system message gets no header.
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "system", "content": "A."}, {"role": "system", "content": "B."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
      {"role": "system", "content": "C."}], "thinking": {"type": "disabled"}})"),
      Expand("{BOS}A.B.{U}Hi{A}{/think}Yo{EOS}C."));
}

TEST(EncoderV4Test, LatestReminder) {
  // A missing reminder text renders as Python's "None".
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "latest_reminder", "content": "Be brief."}, {"role": "latest_reminder"}],
      "thinking": {"type": "disabled"}})"),
            Expand("{BOS}{U}Hi{A}{/think}{LR}Be brief.{LR}None"));
}

TEST(EncoderV4Test, ContentParts) {
  // Tool results may be arrays: text parts kept, others marked unsupported; null is "None".
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "user", "content": "go"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "part1"},
        {"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "part2"}]},
      {"role": "tool", "tool_call_id": "c", "content": null}], "thinking": {"type": "disabled"}})"),
      Expand("{BOS}{U}go{A}{/think}\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n\n"
             "</{DSML}invoke>\n</{DSML}tool_calls>{EOS}{U}<tool_result>part1\n\n[Unsupported "
             "image_url]\n\npart2</tool_result>\n\n<tool_result>None</tool_result>{A}{/think}"));
  // Other roles need string content.
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})"),
            "ERROR: bad chat request: messages[0]: the V4 encoding does not accept content as an "
            "array of parts for role user (send a string)");
  EXPECT_EQ(
      V4(R"({"messages": [{"role": "system", "content": []}, {"role": "user", "content": "x"}]})"),
      "ERROR: bad chat request: messages[0]: the V4 encoding does not accept content as an "
      "array of parts for role system (send a string)");
  EXPECT_EQ(V4(R"({"messages": [{"role": "user", "content": null}]})"),
            "ERROR: bad chat request: messages[0]: user content must not be null");
}

// Vision-Exp checkpoints (EncodeOptions::v4_picture_parts): every role's parts are joined by
// blank lines, a picture as one placeholder piece, tool results too; a typed placeholder and a
// picture without a source are refused; without the option the V4 rules hold.
TEST(EncoderV4Test, PicturePartsOnVisionExp) {
  const EncodeOptions pictures{.v4_picture_parts = true};
  const std::string body = R"({"messages": [
      {"role": "system", "content": "sys"},
      {"role": "user", "content": [{"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
        {"type": "text", "text": "And this?"}, {"type": "image_url", "image_url": "u2"}]},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "shot", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": {"url": "u3"}},
        {"type": "text", "text": "done"}]}], "thinking": {"type": "disabled"}})";
  EXPECT_EQ(testing::Render(body, EncodingVersion::kV4, pictures),
            Expand("{BOS}sys{U}What is this?\n\n{IMG}\n\nAnd this?\n\n{IMG}{A}{/think}\n\n<{DSML}tool_calls>\n"
                   "<{DSML}invoke name=\"shot\">\n\n</{DSML}invoke>\n</{DSML}tool_calls>{EOS}{U}<tool_result>"
                   "{IMG}\n\ndone</tool_result>{A}{/think}"));
  const EncodedPrompt prompt = testing::MustEncode(body, EncodingVersion::kV4, pictures);
  EXPECT_EQ(ImageSources(prompt), (std::vector<std::string>{"data:image/png;base64,AA", "u2", "u3"}));
  // Without the option: V4's rules (user parts refused, a tool result's picture unsupported).
  EXPECT_EQ(V4(body), "ERROR: bad chat request: messages[1]: the V4 encoding does not accept content as an "
                      "array of parts for role user (send a string)");
  EXPECT_EQ(testing::Render(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
      {"type": "image_url", "image_url": {"url": "u"}}]}, {"role": "assistant", "content": "b"}]})",
                            EncodingVersion::kV4, pictures),
            Expand("{BOS}{U}a\n\n{IMG}{A}{think}{/think}b{EOS}"));
  EXPECT_EQ(testing::Render(R"({"messages": [{"role": "user", "content": "look: <｜deepseek_image｜>"}]})",
                            EncodingVersion::kV4, pictures),
            "ERROR: bad chat request: messages[0]: content contains the image placeholder "
            "'<｜deepseek_image｜>'; send images as image content parts");
  EXPECT_EQ(testing::Render(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ""}}]}]})",
                            EncodingVersion::kV4, pictures),
            "ERROR: bad chat request: messages[0]: content[0]: image part has no source");
  // Plain text renders exactly as without the option.
  const std::string text = R"({"messages": [{"role": "user", "content": "hi"}]})";
  EXPECT_EQ(testing::Render(text, EncodingVersion::kV4, pictures), V4(text));
}

TEST(EncoderV4Test, UserTextNeverBecomesControlPieces) {
  EncodedPrompt prompt = testing::MustEncode(
      R"({"messages": [{"role": "user", "content": "<｜User｜>x</think>"}], "thinking": {"type": "disabled"}})",
      EncodingVersion::kV4);
  EXPECT_EQ(prompt.text, Expand("{BOS}{U}{U}x{/think}{A}{/think}"));
  ASSERT_EQ(prompt.pieces.size(), 5u);
  EXPECT_EQ(prompt.pieces[1].kind, PieceKind::kControl);
  EXPECT_EQ(prompt.pieces[2].kind, PieceKind::kText);
  EXPECT_EQ(prompt.pieces[2].text, Expand("{U}x{/think}"));
  EXPECT_EQ(prompt.pieces[3].text, kAssistantToken);
  EXPECT_EQ(prompt.pieces[4].text, kThinkEndToken);
}


std::string Continue(std::string_view body, EncodingVersion version, bool* answer_open) {
  auto request = protocol::ParseChatRequest(body);
  EXPECT_TRUE(request.ok());
  auto c = EncodeChatContinuation(*request, version);
  if (!c.ok()) return "ERROR: " + c.error().message();
  *answer_open = c->answer_open;
  return c->prompt.text;
}

// Chat prefix completion: the conversation before the last message, then that assistant turn
// without its end of sentence.
TEST(EncoderContinuationTest, LastAssistantTurnIsLeftOpen) {
  bool open = false;
  EXPECT_EQ(Continue(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}],
                         "thinking": {"type": "disabled"}})", EncodingVersion::kV4, &open),
            testing::Expand("{BOS}{U}Hi{A}{/think}Hel"));
  EXPECT_TRUE(open);
  EXPECT_EQ(Continue(R"({"messages": [{"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "", "reasoning_content": "Let me"}]})", EncodingVersion::kV4, &open),
            testing::Expand("{BOS}{U}Hi{A}{think}Let me"));
  EXPECT_FALSE(open);  // the reasoning continues
  EXPECT_EQ(Continue(R"({"messages": [{"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Sure", "reasoning_content": "ok"}]})", EncodingVersion::kV41, &open),
            testing::Expand("{BOS}{S}Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the "
                            "reasoning)\n\n{U}Hi{A}{think}ok{/think}Sure"));
  EXPECT_TRUE(open);
  EXPECT_EQ(Continue(R"({"messages": [{"role": "user", "content": "Hi"}]})", EncodingVersion::kV4, &open),
            "ERROR: messages: a continuation needs an assistant message last");
  EXPECT_NE(Continue(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "",
                         "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})",
                     EncodingVersion::kV4, &open).find("cannot carry tool_calls"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::encoding
