// Round trips and malformed input of the worker <-> router wire types.
#include "protocol/cluster.h"

#include <gtest/gtest.h>

namespace flashserve::protocol {
namespace {

KvObject Object(uint8_t fill, KvTier tier, KvObjectKind kind) {
  KvObject o;
  o.tier = tier;
  o.kind = kind;
  o.hash.fill(fill);
  o.hash[31] = 0xab;
  o.expiry_unix = 1'800'000'000;
  return o;
}

TEST(ClusterWireTest, EventPageRoundTrip) {
  KvEventPage page;
  page.epoch = "9f3c";
  page.first_seq = 5;
  page.last_seq = 6;
  page.events.push_back({5, true, Object(1, KvTier::kMemory, KvObjectKind::kBlock)});
  page.events.push_back({6, false, Object(2, KvTier::kShared, KvObjectKind::kBoundary)});
  auto parsed = ParseKvEventPage(ToJson(page));
  ASSERT_TRUE(parsed.ok()) << parsed.error().ToString();
  EXPECT_EQ(parsed->epoch, "9f3c");
  EXPECT_EQ(parsed->first_seq, 5u);
  EXPECT_EQ(parsed->last_seq, 6u);
  EXPECT_FALSE(parsed->gap);
  ASSERT_EQ(parsed->events.size(), 2u);
  EXPECT_TRUE(parsed->events[0].stored);
  EXPECT_FALSE(parsed->events[1].stored);
  EXPECT_EQ(parsed->events[1].seq, 6u);
  EXPECT_EQ(parsed->events[1].object.tier, KvTier::kShared);
  EXPECT_EQ(parsed->events[1].object.kind, KvObjectKind::kBoundary);
  EXPECT_EQ(parsed->events[1].object.hash, page.events[1].object.hash);
  EXPECT_EQ(parsed->events[0].object.expiry_unix, 1'800'000'000);
}

TEST(ClusterWireTest, SnapshotAndLoadRoundTrip) {
  KvSnapshot s;
  s.epoch = "e1";
  s.seq = 42;
  s.objects.push_back(Object(7, KvTier::kDisk, KvObjectKind::kBlock));
  auto ps = ParseKvSnapshot(ToJson(s));
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ(ps->seq, 42u);
  ASSERT_EQ(ps->objects.size(), 1u);
  EXPECT_EQ(ps->objects[0].tier, KvTier::kDisk);
  EXPECT_EQ(ps->objects[0].hash, s.objects[0].hash);

  WorkerLoad l;
  l.model = "m";
  l.fingerprint = "abcd";
  l.queued_prefill_tokens = 1234;
  l.running = 3;
  l.recent_ttft_seconds = 0.25;
  l.prefill_tokens_per_second = 900.5;
  l.busy_fraction = 0.375;
  l.generated_tokens_total = 123456;
  l.engine_busy_seconds_total = 98.25;
  l.transfer_address = "127.0.0.1:9100";
  l.kv_enabled = true;
  l.kv_last_seq = 77;
  l.prompt_format = "v41";
  l.role = WorkerRole::kDecode;
  auto pl = ParseWorkerLoad(ToJson(l));
  ASSERT_TRUE(pl.ok());
  EXPECT_EQ(pl->queued_prefill_tokens, 1234);
  EXPECT_EQ(pl->running, 3);
  EXPECT_DOUBLE_EQ(pl->recent_ttft_seconds, 0.25);
  EXPECT_DOUBLE_EQ(pl->prefill_tokens_per_second, 900.5);
  EXPECT_DOUBLE_EQ(pl->busy_fraction, 0.375);
  EXPECT_EQ(pl->generated_tokens_total, 123456);
  EXPECT_DOUBLE_EQ(pl->engine_busy_seconds_total, 98.25);
  EXPECT_EQ(pl->transfer_address, "127.0.0.1:9100");
  EXPECT_TRUE(pl->kv_enabled);
  EXPECT_EQ(pl->kv_last_seq, 77u);
  EXPECT_EQ(pl->prompt_format, "v41");
  EXPECT_EQ(pl->role, WorkerRole::kDecode);
  EXPECT_NE(ToJson(l).find(R"("role":"decode")"), std::string::npos);
  EXPECT_EQ(ParseWorkerLoad(R"({"fingerprint":"f"})")->prompt_format, "");  // older workers: not reported
  EXPECT_EQ(ParseWorkerLoad(R"({"fingerprint":"f"})")->role, WorkerRole::kBoth);
  for (WorkerRole r : {WorkerRole::kBoth, WorkerRole::kPrefill, WorkerRole::kDecode}) {
    EXPECT_EQ(*ParseWorkerRole(WorkerRoleName(r)), r);
  }
  EXPECT_NE(ParseWorkerRole("encoder").error().message().find("encoder"), std::string::npos);
  EXPECT_FALSE(ParseWorkerLoad(R"({"fingerprint":"f","role":"primary"})").ok());
}

TEST(ClusterWireTest, MalformedInputIsAnErrorNotACrash) {
  EXPECT_FALSE(ParseKvEventPage("").ok());
  EXPECT_FALSE(ParseKvEventPage("[1,2]").ok());
  EXPECT_FALSE(ParseKvEventPage(R"({"epoch":"e","events":{}})").ok());
  EXPECT_FALSE(ParseKvEventPage(R"({"epoch":"e","events":[{"seq":1,"op":"stored","tier":"memory","kind":"block","hash":"zz"}]})").ok());
  EXPECT_FALSE(ParseKvEventPage(R"({"epoch":"e","events":[{"seq":0,"op":"stored","tier":"memory","kind":"block","hash":")" +
                                std::string(64, 'a') + R"("}]})").ok());
  EXPECT_FALSE(ParseKvEventPage(R"({"epoch":"e","events":[{"seq":1,"op":"moved","tier":"memory","kind":"block","hash":")" +
                                std::string(64, 'a') + R"("}]})").ok());
  EXPECT_FALSE(ParseKvEventPage(R"({"epoch":"e","events":[{"seq":1,"op":"stored","tier":"tape","kind":"block","hash":")" +
                                std::string(64, 'a') + R"("}]})").ok());
  EXPECT_FALSE(ParseKvSnapshot(R"({"epoch":"e","seq":-1,"objects":[]})").ok());
  EXPECT_FALSE(ParseWorkerLoad(R"({"model":"m"})").ok());  // no fingerprint
  EXPECT_FALSE(ParseWorkerLoad(R"({"fingerprint":"f","running":"3"})").ok());
  EXPECT_FALSE(ParseWorkerLoad("\xff\xfe").ok());
}

}  // namespace
}  // namespace flashserve::protocol
