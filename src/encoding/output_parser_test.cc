// Output parsing, streamed with the text split at every byte position (and byte by byte): the
// result never depends on the split, and no partial markup ever reaches content. Expected
// values for well-formed outputs match the reference parse_message_from_completion_text.
#include "encoding/output_parser.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "encoding/test_util.h"

namespace flashserve::encoding {
namespace {

using testing::Expand;

struct Parsed {
  std::string reasoning;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  OutputOutcome outcome = OutputOutcome::kStop;
  std::string error;
};

// V4 markup -> V4.1 markup (leading-space tag names).
std::string ToV41(std::string text) {
  for (auto [from, to] : {std::pair<std::string, std::string>{"{DSML}tool_calls", "{DSML} calls"},
                          {"{DSML}invoke", "{DSML} invoke"},
                          {"{DSML}parameter", "{DSML} parameter"}}) {
    for (size_t at = text.find(from); at != std::string::npos;
         at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }
  return text;
}

// Feeds `pieces`; checks after every Feed that what was emitted so far is a prefix of `final`.
Parsed Stream(EncodingVersion version, bool thinking, const std::vector<std::string>& pieces,
              const Parsed* final = nullptr) {
  OutputParser parser(version, thinking);
  Parsed out;
  std::vector<std::pair<std::string, std::string>> begun;  // every call that began
  auto take = [&](ParseDelta delta) {
    out.reasoning += delta.reasoning;
    out.content += delta.content;
    for (ToolCallPiece& piece : delta.tool_calls) {
      ASSERT_EQ(piece.index, begun.size() - (piece.begins ? 0 : 1));
      if (piece.begins) begun.emplace_back(piece.name, "");
      begun.back().second += piece.arguments;
      if (piece.completes) out.calls.push_back(begun.back());
    }
  };
  for (const std::string& piece : pieces) {
    take(parser.Feed(piece));
    if (final != nullptr) {
      EXPECT_TRUE(final->content.starts_with(out.content)) << "content leaked: " << out.content;
      EXPECT_TRUE(final->reasoning.starts_with(out.reasoning))
          << "reasoning leaked: " << out.reasoning;
      EXPECT_LE(out.calls.size(), final->calls.size());
      // A call being written shows its final name and a prefix of its final arguments.
      if (!begun.empty() && begun.size() <= final->calls.size() && final->outcome == OutputOutcome::kToolCalls) {
        const auto& want = final->calls[begun.size() - 1];
        EXPECT_EQ(begun.back().first, want.first);
        EXPECT_TRUE(want.second.starts_with(begun.back().second)) << "arguments diverged: " << begun.back().second;
      }
    }
  }
  take(parser.Finish());
  take(parser.Feed("ignored after Finish"));
  out.outcome = parser.outcome();
  if (parser.error().has_value()) out.error = parser.error()->message;
  return out;
}

void ExpectSame(const Parsed& got, const Parsed& want, const std::string& where) {
  EXPECT_EQ(got.reasoning, want.reasoning) << where;
  EXPECT_EQ(got.content, want.content) << where;
  EXPECT_EQ(got.calls, want.calls) << where;
  EXPECT_EQ(got.outcome, want.outcome) << where;
  EXPECT_EQ(got.error, want.error) << where;
}

// The whole text at once, then every two-piece split, then byte by byte.
void CheckAllSplits(EncodingVersion version, bool thinking, const std::string& text,
                    const Parsed& want) {
  ExpectSame(Stream(version, thinking, {text}), want, "whole");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ExpectSame(Stream(version, thinking, {text.substr(0, cut), text.substr(cut)}, &want), want,
               "cut at " + std::to_string(cut));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ExpectSame(Stream(version, thinking, bytes, &want), want, "byte by byte");
}

const char kToolOutput[] =
    "Need weather.{/think}Let me check.\n\n<{DSML}tool_calls>\n<{DSML}invoke "
    "name=\"get_weather\">\n"
    "<{DSML}parameter name=\"city\" string=\"true\">Paris \"FR\"\nü</{DSML}parameter>\n"
    "<{DSML}parameter name=\"days\" string=\"false\">3</{DSML}parameter>\n</{DSML}invoke>\n"
    "<{DSML}invoke name=\"now\">\n\n</{DSML}invoke>\n</{DSML}tool_calls>{EOS}";

Parsed ToolOutputResult() {
  Parsed want;
  want.reasoning = "Need weather.";
  want.content = "Let me check.";
  want.calls = {{"get_weather", R"({"city": "Paris \"FR\"\nü", "days": 3})"}, {"now", "{}"}};
  want.outcome = OutputOutcome::kToolCalls;
  return want;
}

TEST(OutputParserTest, ThinkingContentAndToolCallsV4) {
  CheckAllSplits(EncodingVersion::kV4, true, Expand(kToolOutput), ToolOutputResult());
}

TEST(OutputParserTest, ThinkingContentAndToolCallsV41) {
  CheckAllSplits(EncodingVersion::kV41, true, Expand(ToV41(kToolOutput)), ToolOutputResult());
  // The V4 block marker is plain content for a V4.1 parser (and vice versa).
  Parsed plain = Stream(EncodingVersion::kV41, false, {Expand("a\n\n<{DSML}tool_calls>")});
  EXPECT_EQ(plain.content, Expand("a\n\n<{DSML}tool_calls>"));
  EXPECT_EQ(plain.outcome, OutputOutcome::kStop);
}

TEST(OutputParserTest, ThinkingAndContent) {
  Parsed want;
  want.reasoning = "r1\nr2";
  want.content = "\n\nThe answer is 4.";
  CheckAllSplits(EncodingVersion::kV4, true, Expand("r1\nr2{/think}\n\nThe answer is 4.{EOS}"),
                 want);
}

TEST(OutputParserTest, ChatModeHoldsBackOnlyPossibleMarkers) {
  Parsed want;
  want.content = "Use <b> tags < x\n\n";
  CheckAllSplits(EncodingVersion::kV41, false, want.content, want);
  OutputParser parser(EncodingVersion::kV4, false);
  EXPECT_EQ(parser.Feed("abc <").content, "abc ");  // "<" may start a marker
  EXPECT_EQ(parser.Feed("b>\n").content, "<b>");    // "\n" may start "\n<｜DSML｜..."
  EXPECT_EQ(parser.Feed("\n<｜DS").content, "");
  EXPECT_EQ(parser.Feed("x").content, "\n\n<｜DSx");
  EXPECT_EQ(parser.Feed("\n").content, "");
  EXPECT_EQ(parser.Finish().content, "\n");
}

TEST(OutputParserTest, ToolBlockAlsoEndsReasoning) {
  Parsed want;
  want.reasoning = "thinking";
  want.calls = {{"f", "{}"}};
  want.outcome = OutputOutcome::kToolCalls;
  CheckAllSplits(
      EncodingVersion::kV4, true,
      Expand("thinking\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n</{DSML}invoke>\n"
             "</{DSML}tool_calls>"),
      want);
}

TEST(OutputParserTest, StrayThinkEndAndTrailingTextAreDropped) {
  Parsed want;
  want.content = "ab";
  CheckAllSplits(EncodingVersion::kV4, false, Expand("a{/think}b{EOS}more text"), want);
  want.content = "x";
  want.calls = {{"f", R"({"a": [1, 2]})"}};
  want.outcome = OutputOutcome::kToolCalls;
  CheckAllSplits(
      EncodingVersion::kV41, false,
      Expand(ToV41("x\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n<{DSML}parameter "
                   "name=\"a\" string=\"false\">[1, 2]</{DSML}parameter>\n</{DSML}invoke>\n"
                   "</{DSML}tool_calls>\ntrailing")),
      want);
}

TEST(OutputParserTest, MalformedToolCalls) {
  const std::string head = "x\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n";
  struct Case {
    std::string text;
    std::vector<std::pair<std::string, std::string>> calls;
    std::string error;
  };
  const Case cases[] = {
      {head +
           "<{DSML}parameter name=\"a\" string=\"true\">1</{DSML}parameter>\n<{DSML}parameter "
           "name=\"a\" string=\"true\">2</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}tool_calls>",
       {},
       "malformed tool call: duplicate parameter name 'a'"},
      {head + "<{DSML}parameter name=\"a\" string=\"maybe\">1</{DSML}parameter>\n</{DSML}invoke>\n"
              "</{DSML}tool_calls>",
       {},
       "malformed tool call: malformed parameter: ' name=\"a\" string=\"maybe\">1<'"},
      {head + "</{DSML}invoke>\nxx<{DSML}invoke name=\"g\">\n</{DSML}invoke>\n</{DSML}tool_calls>",
       {{"f", "{}"}},
       "malformed tool call: expected '>\\n' and a DSML tag between tool-call elements, got "
       "'>\nxx<{DSML}invoke name=\"g\">\n</｜DSM...'"},
      {"x\n\n<{DSML}tool_calls>oops<{DSML}invoke name=\"f\">\n</{DSML}invoke>",
       {},
       "malformed tool call: expected '>\\n' and a DSML tag between tool-call elements, got "
       "'>oops<{DSML}invoke name=\"f\">\n</｜DS...'"},
      {"x\n\n<{DSML}tool_calls>\n<{DSML}invoke nom=\"f\">\n</{DSML}invoke>\n</{DSML}tool_calls>",
       {},
       "malformed tool call: malformed tool name: ' nom=\"f\">\n'"},
  };
  for (const Case& c : cases) {
    Parsed want;
    want.content = "x";
    want.calls = c.calls;
    want.outcome = OutputOutcome::kMalformedToolCall;
    want.error = Expand(c.error);
    std::string text = Expand(c.text);
    // The error text quotes only a short window, so it is the same for every split.
    CheckAllSplits(EncodingVersion::kV4, false, text, want);
    auto result = ParseCompletion(text, EncodingVersion::kV4, false);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().code(), base::ErrorCode::kBadModelOutput);
  }
}

TEST(OutputParserTest, OutputEndingInsideAToolCallIsIncomplete) {
  Parsed want;
  want.reasoning = "r";
  want.content = "x";
  want.outcome = OutputOutcome::kIncompleteToolCall;
  want.error = "the output ended inside a tool-call block";
  CheckAllSplits(EncodingVersion::kV41, true,
                 Expand(ToV41("r{/think}x\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n"
                              "<{DSML}parameter name=\"a\" string=\"true\">1")),
                 want);
  OutputParser parser(EncodingVersion::kV4, false);
  parser.Feed(Expand("\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n</{DSML}invoke>\n"));
  parser.Finish();
  EXPECT_EQ(parser.outcome(), OutputOutcome::kIncompleteToolCall);
  ASSERT_TRUE(parser.error().has_value());
  EXPECT_EQ(parser.error()->raw_text,
            Expand("<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n</{DSML}invoke>\n"));
}

TEST(OutputParserTest, ParseCompletionMatchesTheReference) {
  auto parsed = ParseCompletion(Expand(kToolOutput), EncodingVersion::kV4, true);
  ASSERT_TRUE(parsed.ok()) << parsed.error().ToString();
  EXPECT_EQ(parsed->reasoning_content, "Need weather.");
  EXPECT_EQ(parsed->content, "Let me check.");
  ASSERT_EQ(parsed->tool_calls.size(), 2u);
  EXPECT_EQ(parsed->tool_calls[0].name, "get_weather");
  EXPECT_EQ(parsed->tool_calls[0].arguments, R"({"city": "Paris \"FR\"\nü", "days": 3})");
  EXPECT_EQ(parsed->tool_calls[1].arguments, "{}");
  // Without EOS (the engine stopped on it) the result is the same.
  auto no_eos = ParseCompletion(Expand("a{/think}b"), EncodingVersion::kV41, true);
  ASSERT_TRUE(no_eos.ok());
  EXPECT_EQ(no_eos->reasoning_content, "a");
  EXPECT_EQ(no_eos->content, "b");
}

// What the encoder writes for an assistant turn parses back to the same message.
TEST(OutputParserTest, EncoderOutputRoundTrips) {
  for (EncodingVersion version : {EncodingVersion::kV4, EncodingVersion::kV41}) {
    EncodedPrompt prompt = testing::MustEncode(R"({"messages": [{"role": "user", "content": "go"},
        {"role": "assistant", "reasoning_content": "plan", "content": "Sure.", "tool_calls": [
          {"id": "1", "function": {"name": "f", "arguments": "{\"q\": \"a\\nb\", \"n\": [1.5, {\"k\": null}]}"}},
          {"id": "2", "function": {"name": "g", "arguments": "{}"}}]}],
        "tools": [{"function": {"name": "f"}}, {"function": {"name": "g"}}]})",
                                               version);
    const std::string header = Expand("{A}{think}");
    const std::string output = prompt.text.substr(prompt.text.rfind(header) + header.size());
    auto parsed = ParseCompletion(output, version, true);
    ASSERT_TRUE(parsed.ok()) << parsed.error().ToString();
    EXPECT_EQ(parsed->reasoning_content, "plan");
    EXPECT_EQ(parsed->content, "Sure.");
    ASSERT_EQ(parsed->tool_calls.size(), 2u);
    EXPECT_EQ(parsed->tool_calls[0].arguments, R"({"q": "a\nb", "n": [1.5, {"k": null}]})");
    EXPECT_EQ(parsed->tool_calls[1].name, "g");
  }
}

}  // namespace
}  // namespace flashserve::encoding

namespace flashserve::encoding {
namespace {

// Byte-by-byte fragments of each call: the name comes first, the arguments follow the model.
std::vector<ToolCallPiece> PiecesByteByByte(const std::string& text, EncodingVersion version,
                                            std::vector<size_t>* fed_at = nullptr) {
  OutputParser parser(version, false);
  std::vector<ToolCallPiece> pieces;
  for (size_t i = 0; i < text.size(); ++i) {
    for (ToolCallPiece& p : parser.Feed(text.substr(i, 1)).tool_calls) {
      pieces.push_back(std::move(p));
      if (fed_at) fed_at->push_back(i + 1);
    }
  }
  for (ToolCallPiece& p : parser.Finish().tool_calls) pieces.push_back(std::move(p));
  return pieces;
}

TEST(OutputParserTest, ToolCallArgumentsStreamWhileTheyAreWritten) {
  const std::string text = Expand(kToolOutput).substr(Expand(kToolOutput).find("Let me"));
  std::vector<size_t> fed_at;
  std::vector<ToolCallPiece> pieces = PiecesByteByByte(text, EncodingVersion::kV4, &fed_at);
  ASSERT_FALSE(pieces.empty());
  EXPECT_TRUE(pieces[0].begins);
  EXPECT_EQ(pieces[0].name, "get_weather");
  EXPECT_EQ(pieces[0].arguments, "{");
  // The name is out as soon as the first parameter tag follows it.
  EXPECT_EQ(fed_at[0], text.find(Expand("<{DSML}parameter")) + Expand("<{DSML}parameter").size());
  std::string args;
  size_t city_seen_at = 0;
  int fragments = 0;
  for (size_t i = 0; i < pieces.size() && pieces[i].index == 0; ++i) {
    args += pieces[i].arguments;
    fragments += pieces[i].arguments.empty() ? 0 : 1;
    if (city_seen_at == 0 && args.find("Paris") != std::string::npos) city_seen_at = fed_at[i];
  }
  EXPECT_EQ(args, R"({"city": "Paris \"FR\"\nü", "days": 3})");
  EXPECT_GT(fragments, 10);
  // "Paris" went out before its parameter was closed.
  EXPECT_LT(city_seen_at, text.find(Expand("</{DSML}parameter")));
  // The multi-byte "ü" was never split across fragments.
  for (const ToolCallPiece& p : pieces) EXPECT_NE(p.arguments, "\xC3");
}

// Values that look like the end of a parameter, markup inside values, keys with quotes, empty
// values and parameters that arrive whole: every split gives the authority's arguments.
TEST(OutputParserTest, StreamedArgumentsEqualTheWholeParseForTrickyValues) {
  const std::vector<std::pair<std::string, std::string>> values = {
      {"true", "a<b"},          {"true", "<"},       {"true", "a<\nb"},   {"true", "x<\n"},
      {"true", "</b>"},         {"true", ""},        {"true", "<<\n<"},   {"false", "[1, \"<\"]"},
      {"true", "/{DSML}x"},     {"true", "é€😀"},    {"true", "q\" string=\"false\">"},
      {"false", "{\"k\": \"\\u00e9\"}"},
  };
  for (EncodingVersion version : {EncodingVersion::kV4, EncodingVersion::kV41}) {
    for (size_t i = 0; i < values.size(); ++i) {
      const auto& [flag, value] = values[i];
      std::string body = "\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n";
      body += "<{DSML}parameter name=\"k\" string=\"" + flag + "\">" + value + "</{DSML}parameter>\n";
      body += "<{DSML}parameter name=\"a\\\"b\" string=\"true\">" + value + "z</{DSML}parameter>\n";
      body += "</{DSML}invoke>\n<{DSML}invoke name=\"g\">\n</{DSML}invoke>\n</{DSML}tool_calls>";
      const std::string text = Expand(version == EncodingVersion::kV4 ? body : ToV41(body));
      auto whole = ParseCompletion(text, version, false);
      ASSERT_TRUE(whole.ok()) << i << ": " << whole.error().ToString();
      Parsed want;
      for (const ParsedToolCall& call : whole->tool_calls) want.calls.emplace_back(call.name, call.arguments);
      want.outcome = OutputOutcome::kToolCalls;
      ASSERT_EQ(want.calls.size(), 2u);
      CheckAllSplits(version, false, text, want);
    }
  }
}

// Random blocks built from pieces of markup: whatever the split, the completed calls are the
// whole-text parse's, and a call's streamed arguments never leave the final arguments' prefix.
TEST(OutputParserTest, RandomToolBlocksStreamConsistently) {
  const std::vector<std::string> atoms = {
      "<{DSML}parameter name=\"p", "\" string=\"true\">", "\" string=\"false\">", "</{DSML}parameter>",
      "/{DSML}parameter>", "<", "\n", ">\n", "</{DSML}invoke>", "<{DSML}invoke name=\"h\">\n", "x",
      "1", "\"", "é", "</{DSML}tool_calls>", " name=\"", "string=\"tr"};
  std::mt19937 rng(42);
  int well_formed = 0;
  for (int round = 0; round < 400; ++round) {
    std::string body = "\n\n<{DSML}tool_calls>\n<{DSML}invoke name=\"f\">\n";
    // Mostly well-formed parameters with random values, sometimes random atoms anywhere.
    const int params = static_cast<int>(rng() % 3);
    for (int p = 0; p < params; ++p) {
      body += "<{DSML}parameter name=\"p" + std::to_string(p) + "\" string=\"" + (rng() % 2 ? "true" : "false") + "\">";
      for (int n = static_cast<int>(rng() % 6); n > 0; --n) body += atoms[rng() % atoms.size()];
      body += "</{DSML}parameter>\n";
    }
    if (rng() % 4 == 0) body += atoms[rng() % atoms.size()];
    body += "</{DSML}invoke>\n</{DSML}tool_calls>";
    const std::string text = Expand(body);
    Parsed want = Stream(EncodingVersion::kV4, false, {text});
    if (want.outcome == OutputOutcome::kToolCalls) ++well_formed;
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    ExpectSame(Stream(EncodingVersion::kV4, false, bytes, &want), want, "round " + std::to_string(round));
    const size_t cut = rng() % (text.size() + 1);
    ExpectSame(Stream(EncodingVersion::kV4, false, {text.substr(0, cut), text.substr(cut)}, &want), want,
               "round " + std::to_string(round) + " cut " + std::to_string(cut));
  }
  EXPECT_GT(well_formed, 100);  // the generator exercises the successful path too
}

}  // namespace
}  // namespace flashserve::encoding
