// End-to-end over loopback TCP: TransferSender -> TransferReceiver -> sink, plus raw-socket
// senders that misbehave (corrupt, truncated, silent, dead, oversize, foreign).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "transfer/collector.h"
#include "transfer/receiver.h"
#include "transfer/sender.h"
#include "transfer/transfer_test_util.h"

namespace flashserve::transfer {
namespace {

using base::ErrorCode;
using testutil::HashOf;
using testutil::ObjectPayload;
using testutil::RandomBytes;
using testutil::RawClient;
using testutil::RecordingSink;
using testutil::TestHello;

struct Sent {
  ObjectKind kind;
  kv::BlockHash hash;
  int64_t tokens;
  Payload payload;
};

class TransferTest : public ::testing::Test {
 protected:
  void StartReceiver(TransferSink* sink, ReceiverOptions options = {}) {
    options.model_fingerprint = testutil::kFingerprint;
    auto r = TransferReceiver::Start(options, sink);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    receiver_ = std::move(r).value();
  }
  std::unique_ptr<TransferSender> StartSender(const TransferId& id, Hello hello = TestHello(),
                                              TransferSender::FailureFn on_failure = nullptr) {
    SenderOptions o;
    o.address = "127.0.0.1:" + std::to_string(receiver_->port());
    o.transfer_id = id;
    o.hello = std::move(hello);
    auto s = TransferSender::Start(o, std::move(on_failure));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static std::vector<Sent> MakeObjects(const std::vector<size_t>& sizes, uint64_t seed) {
    std::vector<Sent> out;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool last = i + 1 == sizes.size();
      out.push_back(Sent{last ? ObjectKind::kBoundary : ObjectKind::kBlock, HashOf(static_cast<int>(seed + i)),
                         static_cast<int64_t>(128 * (i + 1)),
                         base::MakeSharedBytes(RandomBytes(sizes[i], seed * 1000 + i))});
    }
    return out;
  }
  static void ExpectSame(const std::vector<Sent>& sent, const std::vector<TransferObject>& got) {
    ASSERT_EQ(sent.size(), got.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_EQ(got[i].kind, sent[i].kind) << i;
      EXPECT_EQ(got[i].hash, sent[i].hash) << i;
      EXPECT_EQ(got[i].tokens, sent[i].tokens) << i;
      ASSERT_NE(got[i].payload, nullptr);
      EXPECT_TRUE(*got[i].payload == *sent[i].payload) << "object " << i << " bytes differ";
    }
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(receiver_->port()); }

  std::unique_ptr<TransferReceiver> receiver_;
};

TEST_F(TransferTest, RoundTripOfAwkwardSizesInOrder) {
  TransferCollector collector;
  StartReceiver(&collector);
  const TransferId id = NewTransferId();
  const auto objects = MakeObjects({0, 1, 4 << 20, 31, 1000003, 4096}, 1);
  auto sender = StartSender(id, TestHello(static_cast<int64_t>(objects.size())));
  for (const Sent& o : objects) ASSERT_TRUE(sender->Send(o.kind, o.hash, o.tokens, o.payload).ok());
  ASSERT_TRUE(sender->Finish(/*source_cached_tokens=*/640).ok());
  ASSERT_TRUE(sender->Wait(5).ok());
  EXPECT_EQ(sender->state(), SenderState::kFinished);
  auto result = collector.Await(id, TransferCollector::Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->hello.model_fingerprint, testutil::kFingerprint);
  EXPECT_EQ(result->hello.cache_namespace, "tenant-a");
  EXPECT_EQ(result->hello.prompt_tokens, 4096);
  ExpectSame(objects, result->objects);
  EXPECT_EQ(result->end.num_objects, objects.size());
  EXPECT_EQ(result->end.source_cached_tokens, 640);  // the prefill side's cache hits travel in END
  EXPECT_EQ(sender->stats().objects_sent, static_cast<int64_t>(objects.size()));
  EXPECT_EQ(receiver_->stats().transfers_completed, 1);
  EXPECT_EQ(collector.size(), 0u);
}

TEST_F(TransferTest, TwoConcurrentTransfers) {
  TransferCollector collector;
  StartReceiver(&collector);
  const TransferId a = NewTransferId(), b = NewTransferId();
  const auto objects_a = MakeObjects({2 << 20, 5, 3 << 20, 77}, 10);
  const auto objects_b = MakeObjects({1 << 20, 0, 2 << 20}, 20);
  auto run = [&](const TransferId& id, const std::vector<Sent>& objects) {
    auto sender = StartSender(id);
    for (const Sent& o : objects) {
      ASSERT_TRUE(sender->Send(o.kind, o.hash, o.tokens, o.payload).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // interleave the two streams
    }
    ASSERT_TRUE(sender->Finish().ok());
    EXPECT_TRUE(sender->Wait(5).ok());
  };
  std::thread ta(run, a, std::cref(objects_a)), tb(run, b, std::cref(objects_b));
  // Await b before a finishes, a possibly after it finished: both orders must work.
  auto rb = collector.Await(b, TransferCollector::Clock::now() + std::chrono::seconds(5));
  ta.join();
  tb.join();
  auto ra = collector.Await(a, TransferCollector::Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  ExpectSame(objects_a, ra->objects);
  ExpectSame(objects_b, rb->objects);
}

TEST_F(TransferTest, CorruptPayloadByteIsRejectedAndNothingOfItDelivered) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  RawClient raw(receiver_->port());
  const std::string good = RandomBytes(70000, 3);
  std::string bad_frame =
      EncodeFrame(FrameType::kObject, id, 2, ObjectPayload({ObjectKind::kBlock, HashOf(2), 256}, RandomBytes(50000, 4)));
  bad_frame[kFrameHeaderBytes + kObjectMetaBytes + 12345] ^= 0x01;
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kObject, id, 1, ObjectPayload({ObjectKind::kBlock, HashOf(1), 128}, good))));
  ASSERT_TRUE(raw.Write(bad_frame));
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value());
  ASSERT_TRUE(rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kDataLoss);
  EXPECT_NE(rec->error->message().find("payload checksum mismatch"), std::string::npos) << rec->error->message();
  ASSERT_EQ(rec->objects.size(), 1u);  // the good object only
  EXPECT_EQ(*rec->objects[0].payload, good);
}

TEST_F(TransferTest, TruncatedFrameIsReported) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  RawClient raw(receiver_->port());
  const std::string frame =
      EncodeFrame(FrameType::kObject, id, 1, ObjectPayload({ObjectKind::kBlock, HashOf(1), 128}, RandomBytes(9000, 5)));
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  ASSERT_TRUE(raw.Write(std::string_view(frame).substr(0, frame.size() / 2)));
  raw.Close();
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kDataLoss);
  EXPECT_NE(rec->error->message().find("truncated"), std::string::npos) << rec->error->message();
  EXPECT_TRUE(rec->objects.empty());
}

TEST_F(TransferTest, DeadSenderIsReportedAtOnce) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  RawClient raw(receiver_->port());
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kObject, id, 1, ObjectPayload({ObjectKind::kBlock, HashOf(1), 128}, "x"))));
  const double t0 = base::MonotonicSeconds();
  raw.Close();  // the process died: the kernel closes its sockets, no END
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kUnavailable) << rec->error->ToString();
  EXPECT_LT(rec->terminal_at_s - t0, 1.0);
  EXPECT_EQ(rec->objects.size(), 1u);
}

TEST_F(TransferTest, SilentSenderTimesOutWithinASecond) {
  RecordingSink sink;
  StartReceiver(&sink);  // default idle timeout: 1 s
  const TransferId id = NewTransferId();
  RawClient raw(receiver_->port());
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  const double t0 = base::MonotonicSeconds();
  auto rec = sink.WaitDone(id);  // connected, said HELLO, then nothing: no heartbeats
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kTimeout) << rec->error->ToString();
  const double elapsed = rec->terminal_at_s - t0;
  EXPECT_GT(elapsed, 0.8);
  EXPECT_LT(elapsed, 1.3);
}

TEST_F(TransferTest, SlowSenderKeptAliveByHeartbeats) {
  TransferCollector collector;
  StartReceiver(&collector);
  const TransferId id = NewTransferId();
  const auto objects = MakeObjects({1000, 2000}, 7);
  auto sender = StartSender(id);
  ASSERT_TRUE(sender->Send(objects[0].kind, objects[0].hash, objects[0].tokens, objects[0].payload).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2300));  // a slow prefill: > 2x the idle timeout
  ASSERT_TRUE(sender->Send(objects[1].kind, objects[1].hash, objects[1].tokens, objects[1].payload).ok());
  ASSERT_TRUE(sender->Finish().ok());
  auto result = collector.Await(id, TransferCollector::Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ExpectSame(objects, result->objects);
  EXPECT_GE(sender->stats().heartbeats_sent, 8);
}

TEST_F(TransferTest, ForeignFingerprintIsRefused) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  std::atomic<int> failures{0};
  auto sender = StartSender(id, Hello{"ffff0000", "tenant-a", 128, -1}, [&](const base::Error&) { failures++; });
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_FALSE(rec->hello.has_value());  // the sink never saw the foreign HELLO as a transfer start
  EXPECT_EQ(rec->error->code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(rec->error->message().find("fingerprint"), std::string::npos);
  base::Status s = sender->Wait(3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("fingerprint"), std::string::npos) << s.ToString();
  EXPECT_EQ(failures.load(), 1);
}

TEST_F(TransferTest, OversizeLengthIsRefusedWithoutWaitingForThePayload) {
  RecordingSink sink;
  ReceiverOptions options;
  options.max_frame_payload = 1 << 20;
  StartReceiver(&sink, options);
  const TransferId id = NewTransferId();
  RawClient raw(receiver_->port());
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  char head[kFrameHeaderBytes];
  EncodeFrameHeader(FrameHeader{FrameType::kObject, id, 1, 1ull << 62, 0}, head);
  const double t0 = base::MonotonicSeconds();
  ASSERT_TRUE(raw.Write(std::string_view(head, sizeof head)));  // header only: 4 EiB never follow
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kResourceExhausted) << rec->error->ToString();
  EXPECT_LT(rec->terminal_at_s - t0, 0.5);  // refused on the header, not after an idle timeout
}

TEST_F(TransferTest, SenderOverLimitObjectFailsTheReceiverToo) {
  RecordingSink sink;
  ReceiverOptions options;
  options.max_frame_payload = 1 << 20;
  StartReceiver(&sink, options);
  const TransferId id = NewTransferId();
  auto sender = StartSender(id);
  auto big = base::MakeSharedBytes(RandomBytes(2 << 20, 9));
  ASSERT_TRUE(sender->Send(ObjectKind::kBlock, HashOf(1), 128, big).ok());
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(sender->Wait(6).ok());
}

TEST_F(TransferTest, QueueOverflowAbortsTheTransfer) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  SenderOptions o;
  o.address = Address();
  o.transfer_id = id;
  o.hello = TestHello();
  o.max_queued_bytes = 1000;
  std::atomic<int> failures{0};
  auto sender = TransferSender::Start(o, [&](const base::Error&) { failures++; });
  ASSERT_TRUE(sender.ok());
  for (int i = 0; i < 200 && (*sender)->state() != SenderState::kStreaming; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto big = base::MakeSharedBytes(std::string(2000, 'x'));
  base::Status s = (*sender)->Send(ObjectKind::kBlock, HashOf(1), 128, big);
  EXPECT_EQ(s.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ((*sender)->Wait(3).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ((*sender)->Send(ObjectKind::kBlock, HashOf(2), 128, big).error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(failures.load(), 1);
  auto rec = sink.WaitDone(id);  // the receiver learns through ABORT
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kCancelled);
  EXPECT_NE(rec->error->message().find("queue full"), std::string::npos) << rec->error->message();
}

TEST_F(TransferTest, AbortAndDestroyReachTheReceiver) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId a = NewTransferId(), b = NewTransferId();
  std::atomic<int> failures{0};
  auto sender_a = StartSender(a, TestHello(), [&](const base::Error&) { failures++; });
  auto sender_b = StartSender(b);
  ASSERT_TRUE(sender_a->Send(ObjectKind::kBlock, HashOf(1), 128, base::MakeSharedBytes("abc")).ok());
  ASSERT_TRUE(sender_b->Send(ObjectKind::kBlock, HashOf(1), 128, base::MakeSharedBytes("abc")).ok());
  auto rec_a_hello = [&] { return sink.num_transfers() >= 2; };
  for (int i = 0; i < 200 && !rec_a_hello(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  sender_a->Abort("client disconnected");
  EXPECT_EQ(sender_a->Wait(3).error().code(), ErrorCode::kCancelled);
  EXPECT_EQ(sender_a->state(), SenderState::kFailed);
  EXPECT_EQ(sender_a->Finish().error().code(), ErrorCode::kCancelled);
  sender_b.reset();  // destroyed without Finish: ABORT "sender destroyed"
  auto rec_a = sink.WaitDone(a), rec_b = sink.WaitDone(b);
  ASSERT_TRUE(rec_a.has_value() && rec_a->error.has_value());
  EXPECT_EQ(rec_a->error->code(), ErrorCode::kCancelled);
  EXPECT_NE(rec_a->error->message().find("client disconnected"), std::string::npos) << rec_a->error->message();
  ASSERT_TRUE(rec_b.has_value() && rec_b->error.has_value());
  EXPECT_NE(rec_b->error->message().find("sender destroyed"), std::string::npos) << rec_b->error->message();
  EXPECT_EQ(failures.load(), 0);  // the caller's own Abort is not reported back to it
}

TEST_F(TransferTest, ConnectFailureIsReported) {
  RecordingSink sink;
  StartReceiver(&sink);
  const int port = receiver_->port();
  receiver_->Stop();  // nothing listens on port any more
  SenderOptions o;
  o.address = "127.0.0.1:" + std::to_string(port);
  o.transfer_id = NewTransferId();
  o.hello = TestHello();
  std::atomic<int> failures{0};
  auto sender = TransferSender::Start(o, [&](const base::Error& e) { failures++; });
  ASSERT_TRUE(sender.ok());
  ASSERT_TRUE((*sender)->Send(ObjectKind::kBlock, HashOf(1), 1, base::MakeSharedBytes("a")).ok() ||
              (*sender)->state() == SenderState::kFailed);
  EXPECT_EQ((*sender)->Wait(3).error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(failures.load(), 1);
  EXPECT_FALSE(TransferSender::Start(SenderOptions{}).ok());  // no address, no fingerprint
}

TEST_F(TransferTest, DuplicateLiveIdIsRefusedWithoutDisturbingTheFirst) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  RawClient first(receiver_->port()), second(receiver_->port());
  ASSERT_TRUE(first.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  for (int i = 0; i < 200 && receiver_->stats().transfers_started < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(second.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello()))));
  for (int i = 0; i < 200 && receiver_->stats().connections_refused < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(receiver_->stats().connections_refused, 1);
  ASSERT_TRUE(first.Write(EncodeFrame(FrameType::kObject, id, 1, ObjectPayload({ObjectKind::kBlock, HashOf(1), 128}, "a"))));
  ASSERT_TRUE(first.Write(EncodeFrame(FrameType::kEnd, id, 2, EncodeEnd({1, 1}))));
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value());
  EXPECT_FALSE(rec->error.has_value()) << rec->error->ToString();
  EXPECT_EQ(rec->objects.size(), 1u);
}

TEST_F(TransferTest, EndThatDisagreesWithWhatArrivedFails) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  RawClient raw(receiver_->port());
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kHello, id, 0, EncodeHello(TestHello(2)))));
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kObject, id, 1, ObjectPayload({ObjectKind::kBlock, HashOf(1), 128}, "ab"))));
  ASSERT_TRUE(raw.Write(EncodeFrame(FrameType::kEnd, id, 2, EncodeEnd({1, 2}))));  // HELLO promised 2
  auto rec = sink.WaitDone(id);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kDataLoss);
  EXPECT_FALSE(rec->end.has_value());
}

TEST_F(TransferTest, GarbageFirstHeaderIsRefusedWithoutSinkCalls) {
  RecordingSink sink;
  StartReceiver(&sink);
  RawClient raw(receiver_->port());
  ASSERT_TRUE(raw.Write(std::string(kFrameHeaderBytes, 'G')));
  for (int i = 0; i < 200 && receiver_->stats().connections_refused < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(receiver_->stats().connections_refused, 1);
  EXPECT_EQ(sink.num_transfers(), 0u);
}

TEST_F(TransferTest, StoppingTheReceiverFailsLiveTransfersOnBothSides) {
  RecordingSink sink;
  StartReceiver(&sink);
  const TransferId id = NewTransferId();
  auto sender = StartSender(id);
  for (int i = 0; i < 200 && receiver_->stats().transfers_started < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  receiver_->Stop();
  auto rec = sink.WaitDone(id, 0.1);
  ASSERT_TRUE(rec.has_value() && rec->error.has_value());
  EXPECT_EQ(rec->error->code(), ErrorCode::kCancelled);
  base::Status s = sender->Wait(1.0);  // the idle sender notices the close at once
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().code(), ErrorCode::kTimeout) << s.ToString();
}

TEST_F(TransferTest, ConnectionsBeyondMaxTransfersAreRefused) {
  RecordingSink sink;
  ReceiverOptions options;
  options.max_transfers = 1;
  StartReceiver(&sink, options);
  RawClient holder(receiver_->port());  // occupies the only slot
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // accepted before the sender connects
  auto sender = StartSender(NewTransferId());
  base::Status s = sender->Wait(3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("too many"), std::string::npos) << s.ToString();
  EXPECT_EQ(receiver_->stats().connections_refused, 1);
}

}  // namespace
}  // namespace flashserve::transfer
