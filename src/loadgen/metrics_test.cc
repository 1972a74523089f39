// Percentiles, goodput, aggregation of records, and the table/JSON reports built from them.
#include "loadgen/metrics.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "loadgen/report.h"

namespace flashserve::loadgen {
namespace {

TEST(PercentileTest, MatchesLinearInterpolationBetweenRanks) {
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 99), 7);
}

TEST(PercentileTest, SummarySortsAndHandlesEmpty) {
  Summary s = Summarize({10, 0, 5, 20, 15});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 10);
  EXPECT_DOUBLE_EQ(s.median, 10);
  EXPECT_DOUBLE_EQ(s.min, 0);
  EXPECT_DOUBLE_EQ(s.max, 20);
  EXPECT_DOUBLE_EQ(s.p90, 18);
  EXPECT_NEAR(s.stddev, 7.0710678, 1e-6);
  Summary empty = Summarize({});
  EXPECT_EQ(empty.count, 0);
  EXPECT_EQ(empty.p99, 0);
}

RequestRecord Ok(double ttft_s, double e2e_s, int64_t out_tokens) {
  RequestRecord r;
  r.outcome = Outcome::kOk;
  r.http_status = 200;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.completion_tokens = out_tokens;
  return r;
}

TEST(GoodputTest, TpotExcludesTheFirstToken) {
  EXPECT_DOUBLE_EQ(Ok(0.1, 1.1, 11).TpotS(), 0.1);
  EXPECT_EQ(Ok(0.1, 1.1, 1).TpotS(), 0.0);
}

TEST(GoodputTest, ParsesLimitsAndRejectsBadOnes) {
  auto g = ParseGoodput({"ttft:200", "tpot:50.5", "e2el:3000"});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g->ttft_ms, 200);
  EXPECT_EQ(*g->tpot_ms, 50.5);
  EXPECT_EQ(*g->e2el_ms, 3000);
  EXPECT_TRUE(ParseGoodput({})->empty());
  for (const char* bad : {"ttft", "ttft:", "ttft:abc", "ttft:-1", "ttft:0", "itl:5", "ttft:5ms"})
    EXPECT_FALSE(ParseGoodput({bad}).ok()) << bad;
}

TEST(GoodputTest, RequestMustMeetEveryLimit) {
  GoodputLimits limits{200.0, 50.0, std::nullopt};
  EXPECT_TRUE(MeetsLimits(Ok(0.2, 0.7, 11), limits));    // ttft at the limit, tpot 50 ms
  EXPECT_FALSE(MeetsLimits(Ok(0.21, 0.7, 11), limits));  // ttft over
  EXPECT_FALSE(MeetsLimits(Ok(0.1, 0.7, 11), {std::nullopt, 50.0, 500.0}));  // e2el over
  EXPECT_FALSE(MeetsLimits(Ok(0.1, 1.2, 11), limits));   // tpot 110 ms
  RequestRecord failed = Ok(0.01, 0.02, 2);
  failed.outcome = Outcome::kError;
  EXPECT_FALSE(MeetsLimits(failed, limits));
}

std::vector<RequestRecord> SampleRecords() {
  std::vector<RequestRecord> v;
  RequestRecord a = Ok(0.1, 1.1, 11);  // tpot 100 ms
  a.has_usage = true, a.prompt_tokens = 100, a.cached_tokens = 0, a.itl_s = {0.1, 0.1};
  RequestRecord b = Ok(0.3, 0.8, 6);   // tpot 100 ms, ttft 300
  b.has_usage = true, b.prompt_tokens = 200, b.cached_tokens = 150, b.turn_idx = 1, b.itl_s = {0.2};
  RequestRecord c = Ok(0.05, 0.5, 10);  // no usage: excluded from the hit rate
  c.itl_s = {0.05};
  RequestRecord err;
  err.error = "HTTP 500: boom";
  RequestRecord rej;
  rej.outcome = Outcome::kRejected;
  rej.num_429 = 3;
  rej.error = "HTTP 429: slow down";
  RequestRecord ok_after_429 = Ok(0.2, 0.4, 3);
  ok_after_429.num_429 = 1;
  return {a, b, c, err, rej, ok_after_429};
}

TEST(AggregateTest, CountsThroughputHitRateAndGoodput) {
  BenchReport r = Aggregate(SampleRecords(), 2.0, GoodputLimits{250.0, std::nullopt, std::nullopt}, 4);
  EXPECT_EQ(r.num_completed, 4);
  EXPECT_EQ(r.num_errors, 1);
  EXPECT_EQ(r.num_rejected, 1);
  EXPECT_EQ(r.num_429_responses, 4);
  EXPECT_EQ(r.num_skipped, 4);
  EXPECT_EQ(r.num_with_usage, 2);
  EXPECT_EQ(r.total_input_tokens, 300);
  EXPECT_EQ(r.total_output_tokens, 30);
  EXPECT_DOUBLE_EQ(r.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(r.output_throughput, 15.0);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, 165.0);
  ASSERT_TRUE(r.hit_rate.has_value());
  EXPECT_DOUBLE_EQ(*r.hit_rate, 0.5);
  EXPECT_EQ(r.num_good, 3);  // all but b (ttft 300 ms)
  EXPECT_DOUBLE_EQ(r.goodput, 1.5);
  EXPECT_DOUBLE_EQ(*r.good_fraction, 0.5);  // of the 6 sent, errors and rejects included
  EXPECT_EQ(r.num_requests_with_429, 2);
  EXPECT_EQ(r.itl_ms.count, 4);
  EXPECT_EQ(r.tpot_ms.count, 4);
  EXPECT_DOUBLE_EQ(r.ttft_ms.max, 300);
  EXPECT_EQ(r.error_counts.at("HTTP 500: boom"), 1);
  EXPECT_EQ(r.error_counts.at("HTTP 429: slow down"), 1);
  ASSERT_EQ(r.turns.size(), 2u);
  EXPECT_EQ(r.turns[0].num_completed, 3);
  EXPECT_DOUBLE_EQ(*r.turns[0].hit_rate, 0.0);
  EXPECT_DOUBLE_EQ(*r.turns[1].hit_rate, 0.75);
  EXPECT_NEAR(r.turns[0].mean_ttft_ms, (100 + 50 + 200) / 3.0, 1e-9);
}

TEST(AggregateTest, NoGoodputWithoutLimitsAndNoHitRateWithoutUsage) {
  std::vector<RequestRecord> v = {Ok(0.1, 0.2, 2)};
  BenchReport r = Aggregate(v, 1.0, {}, 0);
  EXPECT_EQ(r.goodput, 0);
  EXPECT_FALSE(r.good_fraction.has_value());
  EXPECT_FALSE(r.hit_rate.has_value());
  BenchReport empty = Aggregate({}, 0.0, {}, 0);
  EXPECT_EQ(empty.num_completed, 0);
  EXPECT_EQ(empty.request_throughput, 0);
}

TEST(ReportTest, JsonHoldsEveryNumberAndTheParameters) {
  BenchConfig config;
  config.concurrency = 4;
  DatasetConfig dataset;
  dataset.kind = DatasetKind::kSharedPrefix;
  auto records = SampleRecords();
  BenchReport r = Aggregate(records, 2.0, GoodputLimits{250.0, std::nullopt, std::nullopt}, 0);
  RunInfo info{&config, &dataset, "tiny", "", 3, 0, 0, {}};
  auto doc = nlohmann::json::parse(ReportJson(r, info, &records));
  EXPECT_EQ(doc["params"]["concurrency"], 4);
  EXPECT_EQ(doc["params"]["model"], "tiny");
  EXPECT_EQ(doc["params"]["dataset"]["name"], "shared-prefix");
  EXPECT_EQ(doc["params"]["dataset"]["prefix_len"], dataset.prefix_len);
  EXPECT_EQ(doc["results"]["completed"], 4);
  EXPECT_EQ(doc["results"]["rejected"], 1);
  EXPECT_EQ(doc["results"]["responses_429"], 4);
  EXPECT_EQ(doc["results"]["requests_with_429"], 2);
  EXPECT_DOUBLE_EQ(doc["results"]["goodput"]["fraction"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(doc["results"]["prefix_cache_hit_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(doc["results"]["goodput"]["requests_per_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(doc["results"]["ttft_ms"]["p99"].get<double>(), r.ttft_ms.p99);
  EXPECT_EQ(doc["results"]["turns"].size(), 2u);
  ASSERT_EQ(doc["requests"].size(), records.size());
  EXPECT_EQ(doc["requests"][4]["outcome"], "rejected");
  EXPECT_FALSE(nlohmann::json::parse(ReportJson(r, info, nullptr)).contains("requests"));

  std::string table = FormatTable(r, info);
  for (const char* want : {"Completed requests:", "Goodput (req/s, ttft<=250ms):", "Prefix cache hit rate:",
                           "50.0%", "P99 TTFT (ms):", "Per turn", "HTTP 500: boom", "Requests that got a 429:",
                           "Requests meeting the SLOs:"})
    EXPECT_NE(table.find(want), std::string::npos) << want << "\n" << table;
}

TEST(ReportTest, TraceRunsReportTheTraceAndClippedPrompts) {
  BenchConfig config;
  config.time_scale = 0.5;
  DatasetConfig dataset;
  dataset.kind = DatasetKind::kTrace;
  dataset.trace_path = "/tmp/t.jsonl";
  dataset.trace_block_tokens = 128;
  dataset.max_input_len = 4000;
  BenchReport r = Aggregate(SampleRecords(), 2.0, {}, 0);
  RunInfo info{&config, &dataset, "tiny", "", 1, 36, 5, {}};
  auto doc = nlohmann::json::parse(ReportJson(r, info, nullptr));
  const auto& ds = doc["params"]["dataset"];
  EXPECT_EQ(ds["name"], "trace");
  EXPECT_EQ(ds["trace"], "/tmp/t.jsonl");
  EXPECT_EQ(ds["num_requests"], 36);
  EXPECT_EQ(ds["block_tokens"], 128);
  EXPECT_EQ(ds["time_scale"], 0.5);
  EXPECT_EQ(ds["max_input_len"], 4000);
  EXPECT_EQ(ds["num_clipped"], 5);
  EXPECT_TRUE(doc["results"]["goodput"]["fraction"].is_null());
  std::string table = FormatTable(r, info);
  for (const char* want : {"trace /tmp/t.jsonl (36 requests, 128 tokens per hash id", "trace timestamps x 0.5",
                           "5 (limit 4000 tokens)"})
    EXPECT_NE(table.find(want), std::string::npos) << want << "\n" << table;
}

}  // namespace
}  // namespace flashserve::loadgen
