// The worker's router-facing routes: load report, KV events with the gap rule, snapshots, bad
// query parameters, and a worker without a prefix cache.
#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/routes.h"
#include "kvstore/event_log.h"

namespace flashserve::api {
namespace {

using testing::FakeExchange;

// A service whose KV events come from a real EventLog.
class KvService final : public serve::Service {
 public:
  explicit KvService(bool with_store) : with_store_(with_store) {}
  base::Status Submit(protocol::GenerateRequest, serve::EventSink) override { return base::Status::Ok(); }
  void Cancel(const std::string&) override {}
  serve::ServiceStats Stats() const override {
    serve::ServiceStats s;
    s.running = 3;
    s.waiting = 1;
    s.queued_prefill_tokens = 700;
    s.prefill_tokens_per_second = 1500;
    s.busy_fraction = 0.25;
    s.state_pool_bytes = 10;
    s.state_pool_capacity = 100;
    return s;
  }
  serve::ModelInfo Info() const override {
    serve::ModelInfo i;
    i.name.assign(1, 'm');  // not = "m": GCC 12 -Wrestrict false positive
    i.fingerprint = "f00d";
    return i;
  }
  bool HasKvEvents() const override { return with_store_; }
  protocol::KvEventPage KvEvents(uint64_t after, size_t max) const override { return log.Since(after, max); }
  protocol::KvSnapshot KvSnapshot() const override {
    protocol::KvSnapshot s;
    s.epoch = log.epoch();
    s.seq = log.last_seq();
    return s;
  }
  kvstore::EventLog log{4, "ep1"};

 private:
  bool with_store_;
};

kvstore::ObjectKey Key(uint8_t b) {
  kvstore::ObjectKey k;
  k.hash.fill(b);
  return k;
}

class ClusterRoutesTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeExchange> Get(void (*handler)(const RouteContext&, const ExchangePtr&), const std::string& target,
                                    KvService& service) {
    RouteContext ctx;
    ctx.service = &service;
    ctx.metrics = &metrics_;
    ctx.options.role = protocol::WorkerRole::kBoth;
    auto ex = std::make_shared<FakeExchange>("", "GET", target);
    handler(ctx, ex);
    return ex;
  }
  ApiMetrics metrics_;
};

TEST_F(ClusterRoutesTest, LoadReportCarriesQueueFingerprintAndEventHead) {
  KvService service(true);
  service.log.Append(kvstore::Tier::kMemory, Key(1), true, 5);
  metrics_.RecordTimeToFirstToken(0.5);
  auto ex = Get(HandleLoad, "/v1/load", service);
  ASSERT_EQ(ex->status, 200);
  auto load = protocol::ParseWorkerLoad(ex->body);
  ASSERT_TRUE(load.ok()) << ex->body;
  EXPECT_EQ(load->fingerprint, "f00d");
  EXPECT_EQ(load->queued_prefill_tokens, 700);
  EXPECT_EQ(load->running, 3);
  EXPECT_DOUBLE_EQ(load->prefill_tokens_per_second, 1500);
  EXPECT_DOUBLE_EQ(load->busy_fraction, 0.25);
  EXPECT_DOUBLE_EQ(load->recent_ttft_seconds, 0.5);
  EXPECT_TRUE(load->kv_enabled);
  EXPECT_EQ(load->kv_epoch, "ep1");
  EXPECT_EQ(load->kv_last_seq, 1u);
}

TEST_F(ClusterRoutesTest, EventsPageFromAfterWithLimitAndGap) {
  KvService service(true);
  for (uint8_t i = 1; i <= 6; ++i) service.log.Append(kvstore::Tier::kDisk, Key(i), true, 9);  // ring keeps 3..6
  auto page = protocol::ParseKvEventPage(Get(HandleKvEvents, "/v1/kv/events?after=3&limit=2", service)->body);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->events.size(), 2u);
  EXPECT_EQ(page->events[0].seq, 4u);
  EXPECT_EQ(page->events[0].object.tier, protocol::KvTier::kDisk);
  auto gap = protocol::ParseKvEventPage(Get(HandleKvEvents, "/v1/kv/events?after=1", service)->body);
  ASSERT_TRUE(gap.ok());
  EXPECT_TRUE(gap->gap);
  auto snap = protocol::ParseKvSnapshot(Get(HandleKvSnapshot, "/v1/kv/snapshot", service)->body);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->seq, 6u);
  EXPECT_EQ(Get(HandleKvEvents, "/v1/kv/events?after=-1", service)->status, 400);
  EXPECT_EQ(Get(HandleKvEvents, "/v1/kv/events?after=12x", service)->status, 400);
}

TEST_F(ClusterRoutesTest, WorkerWithoutPrefixCacheAnswers404) {
  KvService service(false);
  EXPECT_EQ(Get(HandleKvEvents, "/v1/kv/events", service)->status, 404);
  EXPECT_EQ(Get(HandleKvSnapshot, "/v1/kv/snapshot", service)->status, 404);
  auto load = protocol::ParseWorkerLoad(Get(HandleLoad, "/v1/load", service)->body);
  ASSERT_TRUE(load.ok());
  EXPECT_FALSE(load->kv_enabled);
}

}  // namespace
}  // namespace flashserve::api
