// TransferInbox: import on arrival for named transfers, hold-then-import when the request comes
// second, never import for transfers no request names, END / failure / missing-HELLO outcomes.
#include "serve/transfer_inbox.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

namespace flashserve::serve {
namespace {

class RecordingService final : public Service {
 public:
  base::Status Submit(protocol::GenerateRequest, EventSink) override { return base::Status::Ok(); }
  void Cancel(const std::string&) override {}
  ServiceStats Stats() const override { return {}; }
  ModelInfo Info() const override { return {}; }
  void ImportObject(const CacheObject& object) override {
    std::lock_guard<std::mutex> lock(mu);
    imported.push_back(object.hash[0]);
  }
  std::vector<uint8_t> Imported() {
    std::lock_guard<std::mutex> lock(mu);
    return imported;
  }
  std::mutex mu;
  std::vector<uint8_t> imported;
};

transfer::TransferObject Object(uint8_t tag) {
  transfer::TransferObject o;
  o.hash.fill(tag);
  o.tokens = 128;
  o.payload = base::MakeSharedBytes(std::string(100, static_cast<char>(tag)));
  return o;
}

transfer::TransferId Id(uint8_t tag) {
  transfer::TransferId id{};
  id.fill(tag);
  return id;
}

TEST(TransferInboxTest, NamedTransferImportsOnArrivalAndEndCarriesTheHits) {
  RecordingService service;
  TransferInbox inbox(&service);
  std::promise<TransferInbox::Outcome> done;
  inbox.Expect(Id(1), [&](const TransferInbox::Outcome& o) { done.set_value(o); });
  inbox.OnHello(Id(1), {});
  inbox.OnObject(Id(1), Object(7));
  EXPECT_EQ(service.Imported(), std::vector<uint8_t>{7});  // before END
  inbox.OnObject(Id(1), Object(8));
  inbox.OnEnd(Id(1), transfer::EndSummary{2, 200, 256});
  const TransferInbox::Outcome o = done.get_future().get();
  EXPECT_TRUE(o.ok);
  EXPECT_EQ(o.source_cached_tokens, 256);
  EXPECT_EQ(o.objects, 2);
}

TEST(TransferInboxTest, ObjectsBeforeTheRequestAreHeldThenImported) {
  RecordingService service;
  TransferInbox inbox(&service);
  inbox.OnHello(Id(2), {});
  inbox.OnObject(Id(2), Object(5));
  inbox.OnEnd(Id(2), transfer::EndSummary{1, 100, 0});
  EXPECT_TRUE(service.Imported().empty());  // nobody named transfer 2 yet
  bool called = false;
  inbox.Expect(Id(2), [&](const TransferInbox::Outcome& o) {
    called = true;
    EXPECT_TRUE(o.ok);
  });
  EXPECT_TRUE(called);  // already finished: answered at once
  EXPECT_EQ(service.Imported(), std::vector<uint8_t>{5});
}

TEST(TransferInboxTest, UnnamedTransfersAreNeverImported) {
  RecordingService service;
  TransferInbox inbox(&service, 1.0, /*max_held_bytes=*/150);
  inbox.OnHello(Id(3), {});
  inbox.OnObject(Id(3), Object(1));
  inbox.OnObject(Id(3), Object(2));  // over the hold bound: dropped
  inbox.OnEnd(Id(3), transfer::EndSummary{2, 200, 0});
  EXPECT_TRUE(service.Imported().empty());
  std::promise<int64_t> objects;
  inbox.Expect(Id(3), [&](const TransferInbox::Outcome& o) { objects.set_value(o.objects); });
  EXPECT_EQ(objects.get_future().get(), 2);
  EXPECT_EQ(service.Imported(), std::vector<uint8_t>{1});  // only what the bound held
}

TEST(TransferInboxTest, FailureAndMissingHelloEndTheWait) {
  RecordingService service;
  TransferInbox inbox(&service, /*hello_timeout_s=*/0.2);
  std::promise<TransferInbox::Outcome> failed, silent;
  inbox.Expect(Id(4), [&](const TransferInbox::Outcome& o) { failed.set_value(o); });
  inbox.OnHello(Id(4), {});
  inbox.OnFailed(Id(4), base::Error(base::ErrorCode::kDataLoss, "bad checksum"));
  const TransferInbox::Outcome f = failed.get_future().get();
  EXPECT_FALSE(f.ok);
  EXPECT_NE(f.error.find("bad checksum"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  inbox.Expect(Id(5), [&](const TransferInbox::Outcome& o) { silent.set_value(o); });
  const TransferInbox::Outcome s = silent.get_future().get();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(s.ok);
  EXPECT_GE(waited, 0.15);
  EXPECT_LT(waited, 1.0);
}

}  // namespace
}  // namespace flashserve::serve
