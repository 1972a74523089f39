// RunBenchmark end to end against a scripted OpenAI-compatible server on 127.0.0.1 (port 0):
// timing, usage and hit rates, keep-alive reuse, 429 handling, server errors, dropped
// connections, timeouts, multi-turn history, Poisson arrivals and durations.
#include "loadgen/runner_test_util.h"  // first: Boost users (see its <utility> note)

#include "net/http_client.h"

namespace flashserve::loadgen {
namespace {

using namespace testing;  // NOLINT: the fake server and its helpers

std::unique_ptr<Dataset> RandomDataset(int64_t num_requests, int64_t output_len = 4) {
  DatasetConfig d;
  d.num_requests = num_requests;
  d.input_len = 16;
  d.output_len = output_len;
  return std::move(Dataset::Create(d, nullptr)).value();
}

TEST(RunnerTest, MeasuresTtftItlUsageAndReusesOneConnection) {
  FakeServer server([](int, const Json&) {
    Script s;
    s.pieces = {"w", "x", "y", "z"};
    s.first_delay_ms = 100;
    s.gap_ms = 40;
    s.prompt_tokens = 100;
    s.cached_tokens = 40;
    return s;
  });
  BenchConfig c = Config(server);
  c.api_key = "secret";
  c.ignore_eos = true;
  auto dataset = RandomDataset(3, 4);
  RunResult run = MustRun(c, *dataset);
  ASSERT_EQ(run.records.size(), 3u);
  for (const RequestRecord& r : run.records) {
    ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
    EXPECT_GE(r.ttft_s, 0.100);
    EXPECT_LT(r.ttft_s, 2.0);
    ASSERT_EQ(r.itl_s.size(), 3u);
    double span = r.itl_s[0] + r.itl_s[1] + r.itl_s[2];
    EXPECT_GE(span, 0.100);  // three 40 ms gaps, less scheduling jitter on the first
    EXPECT_LT(span, 2.0);
    EXPECT_GE(r.e2e_s, r.ttft_s + span - 1e-9);
    EXPECT_EQ(r.completion_tokens, 4);
    EXPECT_EQ(r.prompt_tokens, 100);
    EXPECT_EQ(r.cached_tokens, 40);
    EXPECT_NEAR(r.TpotS(), (r.e2e_s - r.ttft_s) / 3, 1e-12);
  }
  EXPECT_EQ(run.model, "m");
  EXPECT_EQ(run.num_connections, 1);
  EXPECT_EQ(server.connections(), 1);
  BenchReport rep = Aggregate(run.records, run.duration_s, {}, run.num_skipped);
  EXPECT_DOUBLE_EQ(*rep.hit_rate, 0.4);
  EXPECT_EQ(rep.total_output_tokens, 12);
  EXPECT_GE(run.duration_s, 3 * 0.22);
  auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(bodies[0]["stream"], true);
  EXPECT_EQ(bodies[0]["stream_options"]["include_usage"], true);
  EXPECT_EQ(bodies[0]["ignore_eos"], true);
  EXPECT_EQ(bodies[0]["max_tokens"], 4);
  EXPECT_EQ(bodies[0]["model"], "m");
  EXPECT_EQ(server.auth_headers()[0], "Bearer secret");
}

TEST(RunnerTest, A429IsARejectUnlessRetryAfterIsHonoured) {
  auto handler = [](int idx, const Json&) {
    Script s;
    if (idx < 2) s.status = 429, s.retry_after = "0.15";
    return s;
  };
  {
    FakeServer server(handler);
    RunResult run = MustRun(Config(server), *RandomDataset(3));
    ASSERT_EQ(run.records.size(), 3u);
    EXPECT_EQ(run.records[0].outcome, Outcome::kRejected);
    EXPECT_EQ(run.records[0].http_status, 429);
    EXPECT_EQ(run.records[0].num_429, 1);
    EXPECT_EQ(run.records[1].outcome, Outcome::kRejected);
    EXPECT_EQ(run.records[2].outcome, Outcome::kOk);
    BenchReport rep = Aggregate(run.records, run.duration_s, {}, 0);
    EXPECT_EQ(rep.num_rejected, 2);
    EXPECT_EQ(rep.num_errors, 0);
    EXPECT_EQ(rep.num_429_responses, 2);
  }
  {
    FakeServer server(handler);
    BenchConfig c = Config(server);
    c.honor_retry_after = true;
    RunResult run = MustRun(c, *RandomDataset(1));
    ASSERT_EQ(run.records.size(), 1u);
    const RequestRecord& r = run.records[0];
    EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
    EXPECT_EQ(r.num_429, 2);
    EXPECT_GE(r.ttft_s, 0.3);  // both waits count towards the latency
  }
  {
    FakeServer server(handler);
    BenchConfig c = Config(server);
    c.honor_retry_after = true;
    c.max_retries = 1;
    RunResult run = MustRun(c, *RandomDataset(1));
    EXPECT_EQ(run.records[0].outcome, Outcome::kRejected);
    EXPECT_EQ(run.records[0].num_429, 2);
  }
}

TEST(RunnerTest, ServerErrorsDroppedConnectionsAndStreamErrorsAreErrors) {
  FakeServer server([](int idx, const Json&) {
    Script s;
    if (idx == 0) s.status = 500;
    if (idx == 1) s.drop_after_first = true;
    if (idx == 2) s.error_event = true;
    return s;
  });
  RunResult run = MustRun(Config(server), *RandomDataset(4));
  ASSERT_EQ(run.records.size(), 4u);
  EXPECT_EQ(run.records[0].outcome, Outcome::kError);
  EXPECT_EQ(run.records[0].error, "HTTP 500: boom");
  EXPECT_EQ(run.records[0].http_status, 500);
  EXPECT_EQ(run.records[1].outcome, Outcome::kError);
  EXPECT_NE(run.records[1].error.find("connection closed"), std::string::npos) << run.records[1].error;
  EXPECT_EQ(run.records[2].outcome, Outcome::kError);
  EXPECT_EQ(run.records[2].error, "error in stream: engine failed");
  EXPECT_EQ(run.records[3].outcome, Outcome::kOk) << run.records[3].error;
  EXPECT_EQ(server.connections(), 2);  // the 500 keeps the connection; the drop does not
  BenchReport rep = Aggregate(run.records, run.duration_s, {}, 0);
  EXPECT_EQ(rep.num_errors, 3);
  EXPECT_EQ(rep.num_completed, 1);
}

TEST(RunnerTest, UnreachableServerAndTimeoutsAreRecordedNotFatal) {
  unsigned short port;
  {
    asio::io_context io;
    tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  BenchConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(port);
  c.model = "m";
  RunResult run = MustRun(c, *RandomDataset(2));
  ASSERT_EQ(run.records.size(), 2u);
  EXPECT_EQ(run.records[0].outcome, Outcome::kError);
  EXPECT_NE(run.records[0].error.find("connecting to 127.0.0.1"), std::string::npos) << run.records[0].error;

  FakeServer server([](int, const Json&) {
    Script s;
    s.stall_ms = 400;
    return s;
  });
  c = Config(server);
  c.timeout_s = 0.1;
  run = MustRun(c, *RandomDataset(1));
  EXPECT_EQ(run.records[0].outcome, Outcome::kError);
  EXPECT_NE(run.records[0].error.find("timed out"), std::string::npos) << run.records[0].error;
}

TEST(RunnerTest, MultiTurnSendsTheRepliesReceivedAndReportsHitRatePerTurn) {
  // Reply "R<idx> done"; usage counts words, with everything before the new user message cached.
  FakeServer server([](int idx, const Json& body) {
    Script s;
    s.pieces = {"R" + std::to_string(idx), " done"};
    int64_t total = 0, last = 0;
    for (const Json& m : body["messages"]) {
      std::istringstream in(m["content"].get<std::string>());
      last = 0;
      for (std::string w; in >> w;) ++last;
      total += last;
    }
    s.prompt_tokens = total;
    s.cached_tokens = total - last;
    return s;
  });
  DatasetConfig d;
  d.kind = DatasetKind::kMultiTurn;
  d.num_conversations = 2;
  d.turns = 3;
  d.turn_len = 5;
  d.prefix_len = 0;
  auto dataset = std::move(Dataset::Create(d, nullptr)).value();
  RunResult run = MustRun(Config(server), *dataset);
  ASSERT_EQ(run.records.size(), 6u);
  auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  for (int idx = 0; idx < 6; ++idx) {
    const Json& msgs = bodies[idx]["messages"];
    int turn = idx % 3;
    ASSERT_EQ(msgs.size(), static_cast<size_t>(2 * turn + 1));
    EXPECT_EQ(msgs.back()["content"], dataset->Make(idx / 3).turns[turn].user);
    if (turn == 0) continue;
    const Json& prev = bodies[idx - 1]["messages"];
    for (size_t i = 0; i < prev.size(); ++i) EXPECT_EQ(msgs[i], prev[i]);
    EXPECT_EQ(msgs[prev.size()]["role"], "assistant");
    EXPECT_EQ(msgs[prev.size()]["content"], "R" + std::to_string(idx - 1) + " done");
  }
  BenchReport rep = Aggregate(run.records, run.duration_s, {}, run.num_skipped);
  ASSERT_EQ(rep.turns.size(), 3u);
  EXPECT_DOUBLE_EQ(*rep.turns[0].hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(*rep.turns[1].hit_rate, 7.0 / 12.0);   // 5 user + 2 reply words cached of 12
  EXPECT_DOUBLE_EQ(*rep.turns[2].hit_rate, 14.0 / 19.0);
}

TEST(RunnerTest, AFailedTurnEndsItsConversation) {
  FakeServer server([](int idx, const Json&) {
    Script s;
    if (idx == 1) s.status = 500;
    return s;
  });
  DatasetConfig d;
  d.kind = DatasetKind::kMultiTurn;
  d.num_conversations = 2;
  d.turns = 4;
  d.turn_len = 3;
  d.prefix_len = 0;
  RunResult run = MustRun(Config(server), *std::move(Dataset::Create(d, nullptr)).value());
  EXPECT_EQ(run.records.size(), 6u);  // conversation 0: turns 0-1, conversation 1: all four
  EXPECT_EQ(run.num_skipped, 2);
}

TEST(RunnerTest, PoissonArrivalsRespectMaxConcurrency) {
  FakeServer server([](int, const Json&) {
    Script s;
    s.first_delay_ms = 20;
    s.gap_ms = 10;
    return s;
  });
  BenchConfig c = Config(server);
  c.concurrency = 0;
  c.request_rate = 150;
  c.max_concurrency = 2;
  c.seed = 5;
  RunResult run = MustRun(c, *RandomDataset(20));
  ASSERT_EQ(run.records.size(), 20u);
  for (const RequestRecord& r : run.records) EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_LE(server.max_active(), 2);
  EXPECT_LE(run.num_connections, 2);
  EXPECT_GT(run.records.back().start_s, 0.05);
}

TEST(RunnerTest, DurationStopsNewRequestsAndCompletionsEndpointWorks) {
  FakeServer server([](int, const Json&) {
    Script s;
    s.first_delay_ms = 20;
    return s;
  });
  BenchConfig c = Config(server);
  c.api = ApiKind::kCompletions;
  c.concurrency = 2;
  c.duration_s = 0.25;
  RunResult run = MustRun(c, *RandomDataset(0));
  ASSERT_GE(run.records.size(), 4u);
  for (const RequestRecord& r : run.records) {
    EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
    EXPECT_LT(r.start_s, 0.25);
    EXPECT_EQ(r.completion_tokens, 2);
  }
  EXPECT_TRUE(server.bodies()[0].contains("prompt"));
}

TEST(RunnerTest, ModelNameComesFromTheServerWhenNotGiven) {
  FakeServer server([](int, const Json&) { return Script(); });
  BenchConfig c = Config(server);
  c.model = "";
  RunResult run = MustRun(c, *RandomDataset(1));
  EXPECT_EQ(run.model, "fake-model");
  EXPECT_EQ(server.bodies()[0]["model"], "fake-model");
  server.models_status = 404;
  auto failed = RunBenchmark(c, *RandomDataset(1));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message().find("--model"), std::string::npos);
}

TEST(RunnerTest, RejectsBadConfigs) {
  auto dataset = RandomDataset(1);
  BenchConfig c;
  c.concurrency = 2;
  c.request_rate = 1;
  EXPECT_FALSE(RunBenchmark(c, *dataset).ok());
  c = BenchConfig();
  c.max_concurrency = 3;  // without a rate
  EXPECT_FALSE(RunBenchmark(c, *dataset).ok());
  c = BenchConfig();
  c.base_url = "https://127.0.0.1:1";
  EXPECT_EQ(RunBenchmark(c, *dataset).error().code(), base::ErrorCode::kUnimplemented);
  c.base_url = "127.0.0.1:8000";
  EXPECT_FALSE(RunBenchmark(c, *dataset).ok());
  c = BenchConfig();
  EXPECT_FALSE(RunBenchmark(c, *RandomDataset(0)).ok());  // unlimited requests, no duration
}
TEST(ParseBaseUrlTest, SplitsHostPortAndPrefix) {
  auto a = net::ParseBaseUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8000");
  EXPECT_EQ(a->path_prefix, "");
  auto b = net::ParseBaseUrl("http://localhost/api/v1/");
  EXPECT_EQ(b->port, "80");
  EXPECT_EQ(b->path_prefix, "/api");
  auto c = net::ParseBaseUrl("http://[::1]:9000");
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, "9000");
  EXPECT_FALSE(net::ParseBaseUrl("http://:80").ok());
  EXPECT_FALSE(net::ParseBaseUrl("http://h:0").ok());
  EXPECT_FALSE(net::ParseBaseUrl("http://h:99999").ok());
  EXPECT_FALSE(net::ParseBaseUrl("ftp://h").ok());
}

}  // namespace
}  // namespace flashserve::loadgen
