#include "transfer/wire.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>

#include "transfer/frame_io.h"
#include "transfer/socket_io.h"
#include "transfer/transfer_test_util.h"

namespace flashserve::transfer {
namespace {

using base::ErrorCode;
using testutil::ObjectPayload;

TransferId Id(uint8_t b) {
  TransferId id{};
  id.fill(b);
  return id;
}

TEST(WireTest, HeaderRoundTripAndLayout) {
  FrameHeader h{FrameType::kObject, Id(7), 42, 1000, 0x1122334455667788ull};
  char buf[kFrameHeaderBytes];
  EncodeFrameHeader(h, buf);
  EXPECT_EQ(std::memcmp(buf, "FSXF", 4), 0);
  EXPECT_EQ(buf[4], 1);  // version, little-endian
  EXPECT_EQ(buf[6], 2);  // OBJECT
  uint64_t len = 0;
  std::memcpy(&len, buf + 32, 8);
  EXPECT_EQ(len, 1000u);
  auto back = DecodeFrameHeader(std::string_view(buf, sizeof buf));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type, FrameType::kObject);
  EXPECT_EQ(back->transfer_id, Id(7));
  EXPECT_EQ(back->seq, 42u);
  EXPECT_EQ(back->payload_bytes, 1000u);
  EXPECT_EQ(back->payload_checksum, 0x1122334455667788ull);
}

TEST(WireTest, EveryHeaderBitFlipIsRejected) {
  char buf[kFrameHeaderBytes];
  EncodeFrameHeader(FrameHeader{FrameType::kHello, Id(1), 0, 20, 99}, buf);
  for (size_t i = 0; i < sizeof buf; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      char bad[kFrameHeaderBytes];
      std::memcpy(bad, buf, sizeof buf);
      bad[i] ^= static_cast<char>(1 << bit);
      auto r = DecodeFrameHeader(std::string_view(bad, sizeof bad));
      ASSERT_FALSE(r.ok()) << "byte " << i << " bit " << bit;
      EXPECT_EQ(r.error().code(), ErrorCode::kDataLoss);
    }
  }
  EXPECT_FALSE(DecodeFrameHeader(std::string_view(buf, sizeof buf - 1)).ok());
}

TEST(WireTest, MagicVersionAndTypeErrorsAreNamed) {
  std::string frame = EncodeFrame(FrameType::kHeartbeat, Id(1), 3, "");
  std::string bad = frame;
  bad[0] = 'X';
  EXPECT_NE(DecodeFrameHeader(bad).error().message().find("magic"), std::string::npos);
  bad = frame;
  bad[4] = 2;
  EXPECT_NE(DecodeFrameHeader(bad).error().message().find("version"), std::string::npos);
  bad = frame;
  bad[6] = 9;  // header checksum no longer matches: the checksum is checked first
  EXPECT_NE(DecodeFrameHeader(bad).error().message().find("checksum"), std::string::npos);
}

TEST(WireTest, LengthLimitsPerType) {
  auto check = [](FrameType type, uint64_t n, uint64_t max = kMaxFramePayload) {
    return CheckFrameLength(FrameHeader{type, Id(1), 0, n, 0}, max);
  };
  EXPECT_TRUE(check(FrameType::kObject, kMaxFramePayload).ok());
  EXPECT_EQ(check(FrameType::kObject, kMaxFramePayload + 1).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(check(FrameType::kObject, 1ull << 62).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(check(FrameType::kObject, 10).error().code(), ErrorCode::kDataLoss);  // shorter than its meta
  EXPECT_EQ(check(FrameType::kObject, 2000, 1000).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(check(FrameType::kHeartbeat, 1).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(check(FrameType::kHello, kMaxHelloPayload + 1).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(check(FrameType::kAbort, kMaxAbortReason + 1).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(check(FrameType::kEnd, 23).error().code(), ErrorCode::kDataLoss);
  EXPECT_TRUE(check(FrameType::kEnd, 24).ok());
}

TEST(WireTest, PayloadCodecs) {
  Hello hello{"abcdef", "ns", 300, 3};
  auto h = DecodeHello(EncodeHello(hello));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->model_fingerprint, "abcdef");
  EXPECT_EQ(h->cache_namespace, "ns");
  EXPECT_EQ(h->prompt_tokens, 300);
  EXPECT_EQ(h->expected_objects, 3);
  const std::string encoded = EncodeHello(hello);
  for (size_t n = 0; n < encoded.size(); ++n) EXPECT_FALSE(DecodeHello(encoded.substr(0, n)).ok()) << n;
  EXPECT_FALSE(DecodeHello(encoded + "x").ok());
  EXPECT_FALSE(DecodeHello(EncodeHello(Hello{"", "", 0, -1})).ok());

  ObjectMeta meta{ObjectKind::kBoundary, testutil::HashOf(5), 128};
  char buf[kObjectMetaBytes];
  EncodeObjectMeta(meta, buf);
  auto m = DecodeObjectMeta(std::string_view(buf, sizeof buf));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, ObjectKind::kBoundary);
  EXPECT_EQ(m->hash, testutil::HashOf(5));
  EXPECT_EQ(m->tokens, 128);
  buf[0] = 3;  // an image (a picture's tower output)
  ASSERT_TRUE(DecodeObjectMeta(std::string_view(buf, sizeof buf)).ok());
  EXPECT_EQ(DecodeObjectMeta(std::string_view(buf, sizeof buf))->kind, ObjectKind::kImage);
  buf[0] = 4;
  EXPECT_FALSE(DecodeObjectMeta(std::string_view(buf, sizeof buf)).ok());
  buf[0] = 0;
  EXPECT_FALSE(DecodeObjectMeta(std::string_view(buf, sizeof buf)).ok());

  auto e = DecodeEnd(EncodeEnd(EndSummary{4, 1 << 20}));
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, (EndSummary{4, 1 << 20}));
  TransferId id = NewTransferId(), back{};
  ASSERT_TRUE(ParseTransferId(ToHex(id), &back));
  EXPECT_EQ(back, id);
  EXPECT_FALSE(ParseTransferId("xyz", &back));
  EXPECT_FALSE(ParseTransferId(std::string(32, 'g'), &back));
  auto cached = DecodeEnd(EncodeEnd(EndSummary{1, 2, 640}));
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->source_cached_tokens, 640);
}

// FrameReader over a socket pair: the reader side of every receiver connection.
class FrameReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    reader_fd_.reset(fds[0]);
    writer_fd_.reset(fds[1]);
    SetSocketTimeouts(reader_fd_.get(), 0.2, 0);
  }
  void Write(std::string_view bytes) { ASSERT_EQ(::send(writer_fd_.get(), bytes.data(), bytes.size(), 0), ssize_t(bytes.size())); }

  UniqueFd reader_fd_, writer_fd_;
};

TEST_F(FrameReaderTest, ReadsValidFramesInOrder) {
  FrameReader reader(reader_fd_.get(), 0.2, 1 << 20);
  const std::string object = testutil::RandomBytes(100000, 1);
  Write(EncodeFrame(FrameType::kHello, Id(3), 0, EncodeHello(testutil::TestHello())));
  Write(EncodeFrame(FrameType::kObject, Id(3), 1, ObjectPayload({ObjectKind::kBlock, testutil::HashOf(1), 128}, object)));
  Write(EncodeFrame(FrameType::kHeartbeat, Id(3), 2, ""));
  auto hello = reader.Next();
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_EQ(hello->header.type, FrameType::kHello);
  auto obj = reader.Next();
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  EXPECT_EQ(*obj->object, object);
  EXPECT_EQ(obj->meta.tokens, 128);
  EXPECT_EQ(reader.Next()->header.type, FrameType::kHeartbeat);
  auto idle = reader.Next();
  EXPECT_EQ(idle.error().code(), ErrorCode::kTimeout);
  writer_fd_.reset();
  EXPECT_EQ(reader.Next().error().code(), ErrorCode::kUnavailable);
}

TEST_F(FrameReaderTest, RejectsASequenceGapAndAForeignId) {
  FrameReader reader(reader_fd_.get(), 0.2, 1 << 20);
  Write(EncodeFrame(FrameType::kHeartbeat, Id(3), 0, ""));
  Write(EncodeFrame(FrameType::kHeartbeat, Id(3), 2, ""));
  ASSERT_TRUE(reader.Next().ok());
  auto gap = reader.Next();
  EXPECT_EQ(gap.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(gap.error().message().find("sequence"), std::string::npos);

  FrameReader other(writer_fd_.get(), 0.2, 1 << 20);
  ::send(reader_fd_.get(), EncodeFrame(FrameType::kHeartbeat, Id(4), 0, "").data(), kFrameHeaderBytes, 0);
  ::send(reader_fd_.get(), EncodeFrame(FrameType::kHeartbeat, Id(5), 1, "").data(), kFrameHeaderBytes, 0);
  ASSERT_TRUE(other.Next().ok());
  EXPECT_EQ(other.Next().error().code(), ErrorCode::kDataLoss);
}

TEST_F(FrameReaderTest, RejectsAFlippedPayloadByteAndATruncatedFrame) {
  FrameReader reader(reader_fd_.get(), 0.2, 1 << 20);
  std::string frame =
      EncodeFrame(FrameType::kObject, Id(3), 0, ObjectPayload({ObjectKind::kBlock, testutil::HashOf(1), 1}, "abcdef"));
  frame[kFrameHeaderBytes + kObjectMetaBytes + 2] ^= 0x20;
  Write(frame);
  auto r = reader.Next();
  EXPECT_EQ(r.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(r.error().message().find("payload checksum"), std::string::npos);

  FrameReader truncated(writer_fd_.get(), 0.2, 1 << 20);
  const std::string whole = EncodeFrame(FrameType::kAbort, Id(3), 0, "a reason");
  ::send(reader_fd_.get(), whole.data(), whole.size() - 3, 0);
  reader_fd_.reset();
  auto t = truncated.Next();
  EXPECT_EQ(t.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(t.error().message().find("truncated"), std::string::npos);
}

TEST_F(FrameReaderTest, OversizeLengthIsRefusedBeforeReadingOrAllocating) {
  FrameReader reader(reader_fd_.get(), 5.0, 1 << 20);
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(FrameHeader{FrameType::kObject, Id(3), 0, 1ull << 62, 0}, head);
  Write(std::string_view(head, sizeof head));  // no payload follows: an attempt to read it would time out
  const double t0 = base::MonotonicSeconds();
  auto r = reader.Next();
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_LT(base::MonotonicSeconds() - t0, 1.0);
  EXPECT_EQ(reader.transfer_id(), Id(3));  // the intact header still names the transfer
}

}  // namespace
}  // namespace flashserve::transfer
