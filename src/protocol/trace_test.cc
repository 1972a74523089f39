// The JSON-lines trace codec: parse (sorting, optional fields, errors naming the line), format
// round trip, file read/write.
#include "protocol/trace.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace flashserve::protocol {
namespace {

TEST(TraceTest, ParseFormatRoundTrip) {
  const std::string text =
      "{\"timestamp\": 2000, \"input_length\": 300, \"output_length\": 20, \"hash_ids\": [1, 2, 3]}\n"
      "\n"
      "{\"timestamp\": 500, \"input_length\": 130, \"output_length\": 5, \"hash_ids\": [1, 9], \"session\": \"a\"}\n";
  auto trace = ParseTrace(text);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(trace->size(), 2u);
  EXPECT_DOUBLE_EQ((*trace)[0].arrival_s, 0.5);  // sorted by arrival
  EXPECT_EQ((*trace)[0].session, "a");
  EXPECT_EQ((*trace)[1].hash_ids, (std::vector<int64_t>{1, 2, 3}));
  auto again = ParseTrace(FormatTrace(*trace));
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[1].input_tokens, 300);
  EXPECT_EQ((*again)[1].output_tokens, 20);
  EXPECT_EQ((*again)[0].session, "a");
  EXPECT_EQ((*again)[1].session, "");
  EXPECT_EQ(FormatTrace(*again), FormatTrace(*trace));
}

TEST(TraceTest, OptionalFieldsAndStableOrder) {
  auto trace = ParseTrace(
      "{\"timestamp\": 7, \"input_length\": 4, \"hash_ids\": [], \"session\": null}\r\n"
      "{\"timestamp\": 7, \"input_length\": 5, \"hash_ids\": [-3]}");  // no trailing newline
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(trace->size(), 2u);
  EXPECT_EQ((*trace)[0].input_tokens, 4);  // equal timestamps keep file order
  EXPECT_EQ((*trace)[0].output_tokens, 0);
  EXPECT_EQ((*trace)[1].hash_ids, (std::vector<int64_t>{-3}));
  EXPECT_TRUE(ParseTrace("").ok());
}

TEST(TraceTest, ErrorsNameTheLine) {
  auto bad = ParseTrace("{\"timestamp\": 1, \"input_length\": 1, \"hash_ids\": []}\n{\"timestamp\": 1}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(ParseTrace("not json\n").ok());
  EXPECT_FALSE(ParseTrace("[1, 2]\n").ok());
  EXPECT_FALSE(ParseTrace("{\"timestamp\": 1, \"input_length\": 1, \"hash_ids\": [\"x\"]}").ok());
  EXPECT_FALSE(ParseTrace("{\"timestamp\": -1, \"input_length\": 1, \"hash_ids\": []}").ok());
  EXPECT_FALSE(ParseTrace("{\"timestamp\": 1, \"input_length\": \"9\", \"hash_ids\": []}").ok());
  EXPECT_FALSE(ParseTrace("{\"timestamp\": 1, \"input_length\": 1, \"hash_ids\": [], \"session\": 3}").ok());
  // Past 2^53 a count no longer casts to int64 (undefined) nor a time back from milliseconds.
  EXPECT_FALSE(ParseTrace("{\"timestamp\": 1, \"input_length\": 1e300, \"hash_ids\": []}").ok());
  EXPECT_FALSE(ParseTrace("{\"timestamp\": 1e19, \"input_length\": 1, \"hash_ids\": []}").ok());
  EXPECT_TRUE(ParseTrace("{\"timestamp\": 9007199254740992, \"input_length\": 1, \"hash_ids\": []}").ok());
}

TEST(TraceTest, WritesAndReadsFiles) {
  std::vector<TraceRequest> trace = {{0.25, 300, 7, {4, 5}, "s1"}, {1.0, 10, 1, {}, ""}};
  const std::string path = ::testing::TempDir() + "/protocol_trace_test.jsonl";
  ASSERT_TRUE(WriteTrace(trace, path).ok());
  auto read = ReadTrace(path);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_DOUBLE_EQ((*read)[0].arrival_s, 0.25);
  EXPECT_EQ((*read)[0].hash_ids, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ((*read)[0].session, "s1");
  std::filesystem::remove(path);
  EXPECT_FALSE(ReadTrace(path).ok());
}

}  // namespace
}  // namespace flashserve::protocol
