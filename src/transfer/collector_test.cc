#include "transfer/collector.h"

#include <gtest/gtest.h>

#include <thread>

namespace flashserve::transfer {
namespace {

using Clock = TransferCollector::Clock;
using base::ErrorCode;

TransferObject Obj(int i) {
  kv::BlockHash h{};
  h[0] = static_cast<uint8_t>(i);
  return TransferObject{ObjectKind::kBlock, h, 128, base::MakeSharedBytes(std::to_string(i))};
}

Hello TestHello() { return Hello{"ab", "ns", 256, 2}; }

Clock::time_point In(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

TEST(CollectorTest, TransferFinishedBeforeAwait) {
  TransferCollector c;
  const TransferId id = NewTransferId();
  c.OnHello(id, TestHello());
  c.OnObject(id, Obj(1));
  c.OnObject(id, Obj(2));
  c.OnEnd(id, EndSummary{2, 2});
  auto r = c.Await(id, In(0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->objects.size(), 2u);
  EXPECT_EQ(*r->objects[1].payload, "2");
  EXPECT_EQ(r->hello.prompt_tokens, 256);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.Await(id, In(10)).error().code(), ErrorCode::kTimeout);  // handed out once
}

TEST(CollectorTest, AwaitBeforeTheTransferArrives) {
  TransferCollector c;
  const TransferId id = NewTransferId();
  std::thread feeder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    c.OnHello(id, TestHello());
    c.OnObject(id, Obj(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.OnEnd(id, EndSummary{1, 1});
  });
  auto r = c.Await(id, In(5000));
  feeder.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->objects.size(), 1u);
}

TEST(CollectorTest, FailureIsReturnedWithOrWithoutHello) {
  TransferCollector c;
  const TransferId a = NewTransferId(), b = NewTransferId();
  c.OnHello(a, TestHello());
  c.OnObject(a, Obj(1));
  c.OnFailed(a, base::Error(ErrorCode::kTimeout, "no data"));
  c.OnFailed(b, base::Error(ErrorCode::kFailedPrecondition, "fingerprint"));  // refused HELLO
  EXPECT_EQ(c.Await(a, In(0)).error().code(), ErrorCode::kTimeout);
  EXPECT_EQ(c.Await(b, In(0)).error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(c.size(), 0u);
}

TEST(CollectorTest, TimedOutAwaitAbandonsTheTransfer) {
  TransferCollector c;
  const TransferId id = NewTransferId(), never = NewTransferId();
  auto r = c.Await(never, In(20));
  EXPECT_EQ(r.error().code(), ErrorCode::kTimeout);
  EXPECT_NE(r.error().message().find("did not arrive"), std::string::npos);
  EXPECT_EQ(c.size(), 0u);
  c.OnHello(id, TestHello());
  c.OnObject(id, Obj(1));
  EXPECT_NE(c.Await(id, In(20)).error().message().find("did not finish"), std::string::npos);
  c.OnObject(id, Obj(2));   // dropped
  c.OnEnd(id, EndSummary{2, 2});
  EXPECT_EQ(c.size(), 0u);  // finished and abandoned: gone
}

TEST(CollectorTest, ForgetAndRetention) {
  TransferCollector c(/*unclaimed_retention_s=*/0.01);
  const TransferId a = NewTransferId(), b = NewTransferId(), d = NewTransferId();
  c.OnHello(a, TestHello());
  c.Forget(a);
  c.OnObject(a, Obj(1));
  c.OnEnd(a, EndSummary{1, 1});
  EXPECT_EQ(c.size(), 0u);
  c.OnHello(b, TestHello());
  c.OnEnd(b, EndSummary{0, 0});  // never awaited
  EXPECT_EQ(c.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  c.OnHello(d, TestHello());  // prunes b
  EXPECT_EQ(c.size(), 1u);
}

}  // namespace
}  // namespace flashserve::transfer
