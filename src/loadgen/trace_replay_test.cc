// Trace replay end to end against the scripted server: scaled timestamps, token-id prompts,
// x-session-id headers, the concurrency cap, goodput against SLOs, and the config checks.
#include "loadgen/runner_test_util.h"

namespace flashserve::loadgen {
namespace {

using namespace testing;  // NOLINT: the fake server and its helpers

std::unique_ptr<Dataset> TraceDataset(std::vector<protocol::TraceRequest> trace) {
  DatasetConfig d;
  d.kind = DatasetKind::kTrace;
  d.num_requests = 0;
  d.trace_block_tokens = 8;
  return std::move(Dataset::CreateFromTrace(d, std::move(trace))).value();
}

TEST(TraceReplayTest, HonoursScaledTimestampsAndSendsTokenIdsAndSessions) {
  FakeServer server([](int, const Json&) { return Script(); });
  // Timestamps 10 s, 10.2 s, 10.5 s at time scale 0.5: sent at 0, 0.1 and 0.25 s.
  auto dataset = TraceDataset({{10.0, 20, 3, {1, 2}, "a"}, {10.2, 12, 5, {1}, ""}, {10.5, 30, 2, {1, 2, 3}, "a"}});
  BenchConfig c = Config(server);
  c.api = ApiKind::kCompletions;
  c.concurrency = 0;
  c.time_scale = 0.5;
  RunResult run = MustRun(c, *dataset);
  ASSERT_EQ(run.records.size(), 3u);
  const double expected[] = {0.0, 0.1, 0.25};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(run.records[i].outcome, Outcome::kOk) << run.records[i].error;
    EXPECT_GE(run.records[i].start_s, expected[i] - 0.002) << i;
    EXPECT_LT(run.records[i].start_s, expected[i] + 0.05) << i;
  }
  auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    Job job = dataset->Make(static_cast<int64_t>(i));
    EXPECT_EQ(bodies[i]["prompt"], Json(job.turns[0].prompt_ids)) << i;  // the token ids themselves
    EXPECT_EQ(bodies[i]["max_tokens"], job.turns[0].max_tokens);
    EXPECT_EQ(bodies[i]["ignore_eos"], true);
  }
  EXPECT_EQ(bodies[0]["prompt"].size(), 20u);
  EXPECT_EQ(server.session_headers(), (std::vector<std::string>{"a", "", "a"}));

  // Time scale 0 with a concurrency cap: back to back, one at a time.
  FakeServer serial([](int, const Json&) {
    Script s;
    s.first_delay_ms = 30;
    return s;
  });
  c = Config(serial);
  c.api = ApiKind::kCompletions;
  c.concurrency = 1;
  c.time_scale = 0;
  run = MustRun(c, *dataset);
  EXPECT_EQ(serial.max_active(), 1);
  EXPECT_LT(run.duration_s, 0.5);  // not the trace's 0.5 s of timestamps plus three requests
  EXPECT_GE(run.records[2].start_s, 0.06);
}

TEST(TraceReplayTest, GoodputCountsSloViolationsAndRejects) {
  // max_tokens names the request: 2 fast, 3 slow first token, 4 slow tokens, 5 rejected.
  FakeServer server([](int, const Json& body) {
    Script s;
    int64_t n = body["max_tokens"].get<int64_t>();
    s.pieces.assign(static_cast<size_t>(n), "t");
    if (n == 3) s.first_delay_ms = 250;
    if (n == 4) s.gap_ms = 60;
    if (n == 5) s.status = 429;
    return s;
  });
  auto dataset = TraceDataset({{0, 8, 2, {1}, ""}, {0, 8, 3, {2}, ""}, {0, 8, 4, {3}, ""}, {0, 8, 5, {4}, ""}});
  BenchConfig c = Config(server);
  c.api = ApiKind::kCompletions;
  c.concurrency = 0;
  c.time_scale = 0;
  RunResult run = MustRun(c, *dataset);
  ASSERT_EQ(run.records.size(), 4u);
  BenchReport rep = Aggregate(run.records, run.duration_s, GoodputLimits{150.0, 40.0, std::nullopt}, 0);
  EXPECT_EQ(rep.num_completed, 3);
  EXPECT_EQ(rep.num_rejected, 1);
  EXPECT_EQ(rep.num_requests_with_429, 1);
  EXPECT_EQ(rep.num_good, 1);
  EXPECT_TRUE(MeetsLimits(run.records[0], rep.goodput_limits));
  EXPECT_FALSE(MeetsLimits(run.records[1], rep.goodput_limits));  // TTFT 250 ms > 150
  EXPECT_FALSE(MeetsLimits(run.records[2], rep.goodput_limits));  // TPOT 60 ms > 40
  ASSERT_TRUE(rep.good_fraction.has_value());
  EXPECT_DOUBLE_EQ(*rep.good_fraction, 0.25);
  EXPECT_NEAR(rep.goodput, 1.0 / run.duration_s, 1e-9);
}

TEST(TraceReplayTest, NeedsTheCompletionsEndpointAndItsOwnArrivals) {
  auto dataset = TraceDataset({{0, 8, 2, {1}, ""}});
  BenchConfig c;
  c.model = "m";
  EXPECT_FALSE(RunBenchmark(c, *dataset).ok());  // chat
  c.api = ApiKind::kCompletions;
  c.request_rate = 5;
  EXPECT_FALSE(RunBenchmark(c, *dataset).ok());
  c.request_rate = 0;
  c.time_scale = -1;
  EXPECT_FALSE(RunBenchmark(c, *dataset).ok());
}

}  // namespace
}  // namespace flashserve::loadgen
