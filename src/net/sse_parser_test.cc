// SseParser: line endings, multi-line data, comments and fields, and byte-boundary splits.
#include "net/sse_parser.h"

#include <gtest/gtest.h>

namespace flashserve::net {
namespace {

std::vector<std::string> FeedPieces(const std::vector<std::string_view>& pieces) {
  SseParser parser;
  std::vector<std::string> events;
  for (std::string_view p : pieces) parser.Feed(p, &events);
  return events;
}

// Exercises LF, CRLF and bare CR line ends, comments, ignored fields, a field without a colon,
// "data:" without a space, multi-line data and an empty data line.
constexpr std::string_view kStream =
    ": keep-alive comment\n"
    "data: {\"a\":1}\n\n"
    "event: message\r\nid: 7\r\ndata: {\"b\":2}\r\n\r\n"
    "data:no-space\r\rdata: line one\ndata: line two\n\n"
    "retry: 100\ndata\n\n"
    "data:  two spaces\n\n"
    "data: [DONE]\n\n";

const std::vector<std::string> kExpected = {"{\"a\":1}",  "{\"b\":2}", "no-space", "line one\nline two",
                                            "",           " two spaces", "[DONE]"};

TEST(SseParserTest, ParsesAllLineEndingsAndFields) { EXPECT_EQ(FeedPieces({kStream}), kExpected); }

TEST(SseParserTest, SplitAtEveryByteBoundaryGivesTheSameEvents) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    EXPECT_EQ(FeedPieces({kStream.substr(0, cut), kStream.substr(cut)}), kExpected) << "cut at " << cut;
  }
}

TEST(SseParserTest, OneByteAtATime) {
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < kStream.size(); ++i) bytes.push_back(kStream.substr(i, 1));
  EXPECT_EQ(FeedPieces(bytes), kExpected);
}

TEST(SseParserTest, CrLfSplitBetweenPiecesIsOneLineEnd) {
  // "\r" ends the data line; the "\n" in the next piece must not count as a blank line.
  auto events = FeedPieces({"data: x\r", "\ndata: y\r\n", "\r\n"});
  EXPECT_EQ(events, (std::vector<std::string>{"x\ny"}));
}

TEST(SseParserTest, EventWithoutBlankLineIsNotDispatched) {
  SseParser parser;
  std::vector<std::string> events;
  parser.Feed("data: {\"a\":1}\n\ndata: {\"cut", &events);
  EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}"}));
  EXPECT_TRUE(parser.HasPartialEvent());
  parser.Feed("\"}\n", &events);
  EXPECT_EQ(events.size(), 1u);
  EXPECT_TRUE(parser.HasPartialEvent());
  parser.Feed("\n", &events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1], "{\"cut\"}");
  EXPECT_FALSE(parser.HasPartialEvent());
}

TEST(SseParserTest, BlankLinesWithoutDataDispatchNothing) {
  EXPECT_TRUE(FeedPieces({"\n\n\r\n: only a comment\n\n"}).empty());
}

}  // namespace
}  // namespace flashserve::net
