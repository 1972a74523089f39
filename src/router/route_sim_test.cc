#include "router/route_sim.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "router/sim_cache.h"
#include "router/trace.h"

namespace flashserve::router {
namespace {

TEST(TraceTest, BlockTableChainsIds) {
  BlockTable table;
  TraceRequest a{0, 3 * 128 + 5, 1, {1, 2, 3, 4}, ""};  // 3 full blocks; the 4th id is partial
  TraceRequest b{0, 4 * 128, 1, {1, 2, 7, 8}, ""};
  TraceRequest c{0, 2 * 128, 1, {5, 2}, ""};  // block id 2 after a different prefix
  std::vector<uint32_t> da, db, dc;
  table.Intern(a, &da);
  table.Intern(b, &db);
  table.Intern(c, &dc);
  ASSERT_EQ(da.size(), 3u);
  ASSERT_EQ(db.size(), 4u);
  EXPECT_EQ(da[0], db[0]);
  EXPECT_EQ(da[1], db[1]);
  EXPECT_NE(da[2], db[2]);
  EXPECT_NE(dc[1], da[1]);  // chained: equal id, different prefix, different key
  EXPECT_EQ(table.size(), 3u + 2u + 2u);
  // Mooncake-style 512-token ids expand to four chained 128-token blocks each.
  BlockTable wide(512);
  std::vector<uint32_t> dw;
  wide.Intern(TraceRequest{0, 1000, 1, {1, 2}, ""}, &dw);
  EXPECT_EQ(dw.size(), 7u);
}

TEST(TraceTest, AgentWorkloadGrowsSessions) {
  AgentWorkload w;
  w.sessions = 10;
  w.turns = 4;
  const auto trace = GenerateAgentTrace(w);
  const auto again = GenerateAgentTrace(w);
  ASSERT_EQ(trace.size(), again.size());
  EXPECT_EQ(trace.back().hash_ids, again.back().hash_ids);
  std::map<std::string, const TraceRequest*> last;
  std::set<std::string> sessions;
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceRequest& r = trace[i];
    if (i > 0) {
      EXPECT_LE(trace[i - 1].arrival_s, r.arrival_s);
    }
    EXPECT_EQ(static_cast<int64_t>(r.hash_ids.size()), (r.input_tokens + 127) / 128);
    sessions.insert(r.session);
    auto it = last.find(r.session);
    if (it != last.end()) {
      const TraceRequest& prev = *it->second;
      EXPECT_GT(r.input_tokens, prev.input_tokens + prev.output_tokens);
      const size_t kept = static_cast<size_t>(prev.input_tokens / 128);  // full blocks of the previous prompt
      for (size_t k = 0; k < kept; ++k) ASSERT_EQ(r.hash_ids[k], prev.hash_ids[k]);
      if (kept < prev.hash_ids.size()) {
        EXPECT_NE(r.hash_ids[kept], prev.hash_ids[kept]);
      }
    }
    last[r.session] = &r;
  }
  EXPECT_EQ(sessions.size(), 10u);
  AgentWorkload bad;
  bad.session_rate_per_s = 0;
  EXPECT_FALSE(bad.Validate().ok());
}

TEST(SimCacheTest, LruAndTiers) {
  WorkerCache cache(/*memory_units=*/4, /*disk_units=*/8, /*boundary_units=*/2);
  std::vector<SimEvent> events;
  const std::vector<uint32_t> blocks = {10, 11, 12};
  const std::vector<int64_t> after = {2};
  cache.Store(blocks, after, &events);
  // Memory holds 4 units: the boundary (2) + 2 blocks; the first block was evicted from memory.
  const kv::ResumePoint l = cache.Lookup(blocks);
  EXPECT_EQ(l.blocks, 3);
  EXPECT_EQ(l.blocks_by_tier[0], 2);
  EXPECT_EQ(l.blocks_by_tier[1], 1);
  EXPECT_EQ(l.boundary_tier, Tier::kMemory);
  int stored = 0, removed = 0;
  for (const SimEvent& e : events) (e.stored ? stored : removed)++;
  EXPECT_EQ(stored, 8);  // 3 blocks + 1 boundary, in two tiers
  EXPECT_EQ(removed, 1);
  events.clear();
  cache.Read(blocks, l, &events);  // block 10 comes back into memory, evicting the LRU
  EXPECT_FALSE(events.empty());
  EXPECT_EQ(cache.Lookup(std::span(blocks).first(2)).blocks, 0);  // no boundary after block 11
}

SimOptions SmallOptions() {
  SimOptions o;
  o.workers = 4;
  o.memory_blocks = 2048;
  o.disk_blocks = 0;
  o.prefill_tokens_per_s = 4000;
  o.chooser.max_queued_prefill_tokens = 1 << 30;
  return o;
}

TEST(RouteSimTest, CacheAwareBeatsRoundRobin) {
  AgentWorkload w;
  w.sessions = 40;
  w.turns = 6;
  w.session_rate_per_s = 1;
  const auto trace = GenerateAgentTrace(w);
  auto report = RunRouteSim(trace, SmallOptions());
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  report->Print();
  const PolicyReport* rr = report->Find("round-robin");
  const PolicyReport* ca = report->Find("cache-aware");
  const PolicyReport* oracle = report->Find("oracle");
  ASSERT_TRUE(rr && ca && oracle && report->Find("least-load") && report->Find("session-affinity"));
  EXPECT_GT(ca->hit_rate, rr->hit_rate + 0.1);
  for (const PolicyReport& r : report->policies) {
    EXPECT_LE(r.hit_rate, oracle->hit_rate + 1e-12) << r.policy;
    EXPECT_EQ(r.requests + r.rejected, static_cast<int64_t>(trace.size())) << r.policy;
    if (!r.timed) continue;
    EXPECT_GT(r.decision_p50_us, 0) << r.policy;
    EXPECT_GE(r.decision_p99_us, r.decision_p50_us) << r.policy;
    EXPECT_GT(r.mean_ttft_s, 0) << r.policy;
    EXPECT_GT(r.min_busy_s, 0) << r.policy;
  }
  EXPECT_LT(ca->mean_ttft_s, rr->mean_ttft_s);
  EXPECT_NE(report->Format().find("| cache-aware |"), std::string::npos);
}

TEST(RouteSimTest, RejectsBadOptions) {
  SimOptions o = SmallOptions();
  o.policies = {"random"};
  EXPECT_FALSE(RunRouteSim({}, o).ok());
  o = SmallOptions();
  o.tokens_per_id = 100;
  EXPECT_FALSE(RunRouteSim({}, o).ok());
  o = SmallOptions();
  o.workers = 0;
  EXPECT_FALSE(RunRouteSim({}, o).ok());
}

}  // namespace
}  // namespace flashserve::router
