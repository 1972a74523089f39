// The serving loop on a small generated model: determinism across batch sizes, prefix-cache
// resume, n choices, cancellation, stop conditions, preemption and input validation.
#include "serve/engine_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "base/clock.h"
#include "engine/test_model.h"
#include "kernels/gemm/matmul.h"
#include "kernels/simd/isa.h"
#include "kv/block_hash.h"
#include "kvstore/kv_store.h"
#include "kvstore/object_file.h"
#include "kvstore/test_util.h"
#include "serve/test_requests.h"
#include "serve/test_store.h"

namespace flashserve::serve {
namespace {

using engine::testing::RandomTokens;
using engine::testing::TestModel;
using testing::Collect;
using testing::Collected;
using testing::Request;

std::string Id(const char* prefix, int i) {
  std::string id = prefix;
  id += std::to_string(i);
  return id;
}

LoopConfig Config() {
  LoopConfig c;
  c.sched.max_step_tokens = 256;
  return c;
}

void RunUntilDone(EngineLoop& s, const std::vector<Collected*>& outs, int max_steps = 10000) {
  for (int i = 0; i < max_steps; ++i) {
    if (std::all_of(outs.begin(), outs.end(), [](Collected* c) { return c->done; })) return;
    s.StepOnce();
  }
  FAIL() << "requests did not finish";
}

// Steps the server until the request is done, waiting while nothing is runnable (a fetch from
// disk in flight), for at most `seconds` of wall-clock time.
bool StepUntilDone(EngineLoop& s, const Collected& out, double seconds = 30) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!out.done && std::chrono::steady_clock::now() < until) {
    if (!s.StepOnce()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out.done;
}

TEST(EngineLoopTest, SeededOutputIsTheSameAloneAndInAnyBatch) {
  const std::vector<int32_t> prompt = RandomTokens(150, 1);
  Collected alone;
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
    ASSERT_TRUE(s.Submit(Request("a", prompt, 12, 77), Collect(&alone)).ok());
    RunUntilDone(s, {&alone});
  }
  ASSERT_EQ(alone.tokens[0].size(), 12u);
  for (int batch : {2, 7, 32}) {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
    std::vector<Collected> others(static_cast<size_t>(batch - 1));
    Collected target;
    std::vector<Collected*> all = {&target};
    for (int i = 0; i < batch - 1; ++i) {
      ASSERT_TRUE(s.Submit(Request(Id("o", i), RandomTokens(20 + i * 7, 100 + i), 5 + i % 9, i), Collect(&others[i])).ok());
      all.push_back(&others[i]);
      if (i == batch / 2) {
        ASSERT_TRUE(s.Submit(Request("t", prompt, 12, 77), Collect(&target)).ok());
      }
    }
    if (batch == 2) {
      ASSERT_TRUE(s.Submit(Request("t", prompt, 12, 77), Collect(&target)).ok());
    }
    RunUntilDone(s, all);
    EXPECT_EQ(target.tokens[0], alone.tokens[0]) << "batch " << batch;
    EXPECT_EQ(target.logprobs[0], alone.logprobs[0]) << "batch " << batch;
  }
}

TEST(EngineLoopTest, PrefixCacheHitGivesTheColdResultAndReportsCachedTokens) {
  std::vector<int32_t> first = RandomTokens(300, 5);
  std::vector<int32_t> second = first;
  std::vector<int32_t> extra = RandomTokens(40, 6);
  second.insert(second.end(), extra.begin(), extra.end());
  protocol::GenerateRequest greedy = Request("b", second, 10, 1);
  greedy.sampling.temperature = 0;
  Collected cold;
  {
    LoopConfig c = Config();
    c.prefix_cache_bytes = 0;
    EngineLoop s(TestModel(), engine::EngineOptions{}, c);
    ASSERT_TRUE(s.Submit(greedy, Collect(&cold)).ok());
    RunUntilDone(s, {&cold});
  }
  EXPECT_EQ(cold.usage.cached_tokens, 0);
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  Collected a, warm;
  ASSERT_TRUE(s.Submit(Request("a", first, 3, 2), Collect(&a)).ok());
  RunUntilDone(s, {&a});
  EXPECT_EQ(a.usage.cached_tokens, 0);
  ASSERT_TRUE(s.Submit(greedy, Collect(&warm)).ok());
  RunUntilDone(s, {&warm});
  EXPECT_EQ(warm.usage.cached_tokens, 256);  // end of input of the first prompt (299 -> 256)
  EXPECT_EQ(warm.usage.prompt_tokens, 340);
  EXPECT_EQ(warm.usage.cache_miss_tokens(), 84);
  EXPECT_EQ(warm.tokens[0], cold.tokens[0]);
  EXPECT_EQ(warm.logprobs[0], cold.logprobs[0]);
  // Another tenant's namespace never hits.
  Collected other;
  protocol::GenerateRequest isolated = greedy;
  isolated.id = "c";
  isolated.cache_namespace = "tenant-2";
  ASSERT_TRUE(s.Submit(isolated, Collect(&other)).ok());
  RunUntilDone(s, {&other});
  EXPECT_EQ(other.usage.cached_tokens, 0);
}

// Disaggregation exports what a resume needs, by kv's rule: blocks with the prompt tokens each
// covers (as Persist stores them) and the boundary after the last.
TEST(EngineLoopTest, ExportPrefixGivesTheObjectsOfAResume) {
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  Collected done;
  const std::vector<int32_t> prompt = RandomTokens(300, 9);
  ASSERT_TRUE(s.Submit(Request("e", prompt, 2, 1), Collect(&done)).ok());
  RunUntilDone(s, {&done});
  const std::vector<CacheObject> all = s.ExportPrefix("", prompt, 0, -1);
  ASSERT_EQ(all.size(), 3u);  // blocks 0 and 1, the boundary at 256 (end of input)
  EXPECT_EQ(all[0].kind, protocol::KvObjectKind::kBlock);
  EXPECT_EQ(all[0].tokens, 128);
  EXPECT_EQ(all[1].tokens, 256);
  EXPECT_EQ(all[2].kind, protocol::KvObjectKind::kBoundary);
  EXPECT_EQ(all[2].tokens, 256);
  EXPECT_EQ(all[2].hash, all[1].hash);
  const std::vector<CacheObject> rest = s.ExportPrefix("", prompt, 1, 256);
  ASSERT_EQ(rest.size(), 2u);  // the receiver has block 0 already
  EXPECT_EQ(rest[0].hash, all[1].hash);
  EXPECT_TRUE(s.ExportPrefix("", prompt, 0, 128).empty());  // no boundary was persisted at 128
  EXPECT_TRUE(s.ExportPrefix("tenant-2", prompt, 0, -1).empty());  // another namespace holds nothing
}

// Cached objects that do not assemble (a corrupt import) are found, fail to restore, and the
// request recomputes: the cold result, no hits reported, no endless retry.
TEST(EngineLoopTest, BadCachedObjectsAreRecomputed) {
  const std::vector<int32_t> prompt = RandomTokens(300, 21);
  protocol::GenerateRequest greedy = Request("g", prompt, 6, 1);
  greedy.sampling.temperature = 0;
  Collected cold, bad;
  {
    LoopConfig c = Config();
    c.prefix_cache_bytes = 0;
    EngineLoop s(TestModel(), engine::EngineOptions{}, c);
    ASSERT_TRUE(s.Submit(greedy, Collect(&cold)).ok());
    RunUntilDone(s, {&cold});
  }
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  const std::string fingerprint = ModelFingerprint(TestModel(), engine::EngineOptions{});
  const std::vector<kv::BlockHash> hashes =
      kv::BlockHashes(kv::HashSeed(fingerprint, ""), std::span<const int32_t>(prompt).subspan(0, 256));
  auto junk = base::MakeSharedBytes(std::string(4096, 'x'));
  s.ImportObject({protocol::KvObjectKind::kBlock, hashes[0], 128, junk});
  s.ImportObject({protocol::KvObjectKind::kBlock, hashes[1], 256, junk});
  s.ImportObject({protocol::KvObjectKind::kBoundary, hashes[1], 256, junk});
  ASSERT_TRUE(s.Submit(greedy, Collect(&bad)).ok());
  RunUntilDone(s, {&bad}, 200);
  EXPECT_GE(s.Stats().kv_tiers[0].hits, 3);  // the restore read them
  EXPECT_EQ(bad.usage.cached_tokens, 0);
  EXPECT_EQ(bad.tokens[0], cold.tokens[0]);
}

TEST(EngineLoopTest, ChoicesForkFromOnePrefillWithTheirOwnSeeds) {
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  protocol::GenerateRequest r = Request("n", RandomTokens(60, 3), 8, 500);
  r.n = 3;
  Collected three;
  ASSERT_TRUE(s.Submit(r, Collect(&three)).ok());
  RunUntilDone(s, {&three});
  ASSERT_EQ(three.tokens.size(), 3u);
  EXPECT_EQ(three.usage.completion_tokens, 24);
  EXPECT_NE(three.tokens[0], three.tokens[1]);
  for (int i = 0; i < 3; ++i) {  // choice i == an n=1 request with seed + i
    Collected single;
    protocol::GenerateRequest one = r;
    one.id = Id("one", i);
    one.n = 1;
    one.sampling.seed = 500 + i;
    ASSERT_TRUE(s.Submit(one, Collect(&single)).ok());
    RunUntilDone(s, {&single});
    EXPECT_EQ(single.tokens[0], three.tokens[i]) << "choice " << i;
  }
}

TEST(EngineLoopTest, CancellationFreesTheSequenceWithinOneStep) {
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  Collected c;
  ASSERT_TRUE(s.Submit(Request("x", RandomTokens(30, 8), 1000, 1), Collect(&c)).ok());
  for (int i = 0; i < 4; ++i) s.StepOnce();
  EXPECT_EQ(s.Stats().running, 1);
  EXPECT_GT(s.Stats().busy_fraction, 0.0);  // the 30-token prefill step counts as prefill time
  EXPECT_LE(s.Stats().busy_fraction, 1.0);
  s.Cancel("x");
  s.StepOnce();
  EXPECT_TRUE(c.done);
  EXPECT_EQ(c.finish[0], protocol::FinishReason::kCancelled);
  EXPECT_EQ(s.Stats().running, 0);
  EXPECT_EQ(s.Stats().state_pool_bytes, 0);
  s.Cancel("unknown");  // ignored
  s.StepOnce();
}

TEST(EngineLoopTest, StopTokensAndLength) {
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  protocol::GenerateRequest greedy = Request("g", RandomTokens(10, 4), 6, 1);
  greedy.sampling.temperature = 0;
  Collected free_run;
  ASSERT_TRUE(s.Submit(greedy, Collect(&free_run)).ok());
  RunUntilDone(s, {&free_run});
  EXPECT_EQ(free_run.finish[0], protocol::FinishReason::kLength);
  ASSERT_EQ(free_run.tokens[0].size(), 6u);
  protocol::GenerateRequest stop = greedy;
  stop.id = "s";
  stop.stop_token_ids = {free_run.tokens[0][2]};
  Collected stopped;
  ASSERT_TRUE(s.Submit(stop, Collect(&stopped)).ok());
  RunUntilDone(s, {&stopped});
  EXPECT_EQ(stopped.finish[0], protocol::FinishReason::kStop);
  EXPECT_EQ(stopped.tokens[0], std::vector<int32_t>(free_run.tokens[0].begin(), free_run.tokens[0].begin() + 2));
  EXPECT_EQ(stopped.usage.completion_tokens, 3);  // the stop token counts, is not emitted
}

TEST(EngineLoopTest, TinyStatePoolPreemptsAndStillGivesTheSameTokens) {
  LoopConfig c = Config();
  // Room for two sequences below 128 tokens; crossing a block boundary while decoding
  // grows a state past the pool, which must preempt the newer sequence.
  c.sched.state_pool_bytes = engine::EstimateStateBytes(TestModel().config(), TestModel().plan(), false, 127) * 2 + 1000;
  EngineLoop small(TestModel(), engine::EngineOptions{}, c);
  EngineLoop big(TestModel(), engine::EngineOptions{}, Config());
  std::vector<Collected> a(4), b(4);
  std::vector<Collected*> pa, pb;
  for (int i = 0; i < 4; ++i) {
    auto r = Request(Id("r", i), RandomTokens(110 + 3 * i, 20 + i), 40, i);
    ASSERT_TRUE(small.Submit(r, Collect(&a[i])).ok());
    ASSERT_TRUE(big.Submit(r, Collect(&b[i])).ok());
    pa.push_back(&a[i]);
    pb.push_back(&b[i]);
  }
  for (int step = 0; step < 5000 && !std::all_of(pa.begin(), pa.end(), [](Collected* x) { return x->done; }); ++step) {
    small.StepOnce();
    ASSERT_LE(small.Stats().state_pool_bytes, c.sched.state_pool_bytes);
  }
  RunUntilDone(big, pb);
  EXPECT_GT(small.Stats().preemptions_total, 0);
  EXPECT_EQ(big.Stats().preemptions_total, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a[i].tokens[0], b[i].tokens[0]) << i;
}

TEST(EngineLoopTest, InvalidRequestsAndFullQueueAreRejected) {
  LoopConfig c = Config();
  c.sched.max_waiting = 2;
  EngineLoop s(TestModel(), engine::EngineOptions{}, c);
  Collected sink;
  auto r = Request("v", {1, 2, 3}, 5, 1);
  auto bad = r;
  bad.prompt = {};
  EXPECT_EQ(s.Submit(bad, Collect(&sink)).error().code(), base::ErrorCode::kInvalidArgument);
  bad = r;
  bad.prompt = {99999};
  EXPECT_EQ(s.Submit(bad, Collect(&sink)).error().code(), base::ErrorCode::kInvalidArgument);
  bad = r;
  bad.max_tokens = 9000;
  EXPECT_EQ(s.Submit(bad, Collect(&sink)).error().code(), base::ErrorCode::kContextOverflow);
  bad = r;
  bad.sampling.temperature = -1;
  EXPECT_EQ(s.Submit(bad, Collect(&sink)).error().code(), base::ErrorCode::kInvalidArgument);
  bad = r;
  bad.n = 0;
  EXPECT_EQ(s.Submit(bad, Collect(&sink)).error().code(), base::ErrorCode::kInvalidArgument);
  std::vector<Collected> queued(5);
  EXPECT_TRUE(s.Submit(Request("q0", {1, 2}, 5, 1), Collect(&queued[0])).ok());
  EXPECT_TRUE(s.Submit(Request("q1", {1, 2}, 5, 1), Collect(&queued[1])).ok());
  EXPECT_EQ(s.Submit(Request("q2", {1, 2}, 5, 1), Collect(&queued[2])).error().code(), base::ErrorCode::kResourceExhausted);
  EXPECT_EQ(s.Stats().requests_rejected_total, 1);
  // Once queued requests start running, the queue has room again; no accepted request fails later.
  s.StepOnce();
  EXPECT_TRUE(s.Submit(Request("q3", {1, 2}, 5, 1), Collect(&queued[3])).ok());
  EXPECT_TRUE(s.Submit(Request("q4", {1, 2}, 5, 1), Collect(&queued[4])).ok());
  RunUntilDone(s, {&queued[0], &queued[1], &queued[3], &queued[4]});
  for (int i : {0, 1, 3, 4}) EXPECT_TRUE(queued[i].error.empty()) << queued[i].error;
}

TEST(EngineLoopTest, EngineThreadServesConcurrentSubmitters) {
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  s.Start();
  std::vector<Collected> outs(6);
  std::mutex mu;
  std::atomic<int> done{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&, i] {
      auto sink = [&, i](const protocol::GenerateEvent& e) {
        std::lock_guard<std::mutex> lock(mu);
        Collect(&outs[i])(e);
        if (e.request_done) ++done;
      };
      ASSERT_TRUE(s.Submit(Request(Id("c", i), RandomTokens(40, 50 + i), 6, i), sink).ok());
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 2000 && done < 6; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.Stop();
  EXPECT_EQ(done.load(), 6);
  for (auto& o : outs) EXPECT_EQ(o.tokens[0].size(), 6u);
}


std::unique_ptr<kvstore::KvStore> DiskStore(const std::string& dir, const base::Clock& clock,
                                            int64_t memory_bytes = 64 << 20) {
  return testing::OpenTestStore(TestModel(), clock, {dir, ""}, memory_bytes);
}

// A fresh directory for one test's disk tier, removed at the end.
struct TempStoreDir {
  explicit TempStoreDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + std::to_string(getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempStoreDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST(EngineLoopStoreTest, PrefixSurvivesARestartThroughTheDiskTier) {
  const TempStoreDir temp("fs_serve_store_");
  const std::string& dir = temp.path;
  base::SystemClock clock;
  protocol::GenerateRequest r = Request("p", RandomTokens(300, 11), 8, 3);
  r.sampling.temperature = 0;
  r.ttl_class = "agent";
  Collected first, second;
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), DiskStore(dir, clock));
    ASSERT_TRUE(s.Submit(r, Collect(&first)).ok());
    RunUntilDone(s, {&first});
    s.Stop();  // flushes the write-through to disk
  }
  EXPECT_EQ(first.usage.cached_tokens, 0);
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), DiskStore(dir, clock));
    r.id = "p2";
    ASSERT_TRUE(s.Submit(r, Collect(&second)).ok());
    ASSERT_TRUE(StepUntilDone(s, second));
    EXPECT_EQ(s.Stats().kv_tiers[1].hits > 0, true);
  }
  EXPECT_EQ(second.usage.cached_tokens, 256);
  EXPECT_EQ(second.usage.cached_disk, 256);
  EXPECT_EQ(second.usage.cached_memory, 0);
  EXPECT_EQ(second.tokens[0], first.tokens[0]);
  EXPECT_EQ(second.logprobs[0], first.logprobs[0]);
}

std::vector<bool> FetchNow(kvstore::KvStore& store, std::vector<kvstore::ObjectKey> keys) {
  std::promise<std::vector<bool>> done;
  store.Fetch(std::move(keys), [&done](std::vector<bool> present) { done.set_value(std::move(present)); });
  return done.get_future().get();
}

// A fetch that completes a prefix whose head is already in L1 keeps that head pinned while the
// rest goes in: where L1 must evict to make room, it evicts something else, and the restore
// uses the whole prefix. L1 misses count only blocks looked for, not boundary snapshots.
TEST(EngineLoopStoreTest, FetchKeepsThePrefixHeadInMemory) {
  const TempStoreDir temp("fs_serve_head_");
  const std::string& dir = temp.path;
  base::SystemClock clock;
  protocol::GenerateRequest r = Request("p", RandomTokens(400, 12), 4, 3);
  r.sampling.temperature = 0;
  Collected first, again, second;
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), DiskStore(dir, clock));
    ASSERT_TRUE(s.Submit(r, Collect(&first)).ok());
    RunUntilDone(s, {&first});
    r.id = "p1";
    ASSERT_TRUE(s.Submit(r, Collect(&again)).ok());
    RunUntilDone(s, {&again});
    s.Stop();
    EXPECT_EQ(again.usage.cached_memory, 384);
    // Block 0 of the cold prompt; the hit found blocks 0-2 and the boundary after block 2, and its
    // lookups of boundaries after blocks 0 and 1 (never stored) are no misses.
    EXPECT_EQ(s.Stats().kv_tiers[0].misses, 1);
    EXPECT_EQ(s.Stats().kv_tiers[0].hits, 4);
  }
  const std::string fingerprint = ModelFingerprint(TestModel(), engine::EngineOptions{});
  const std::vector<kv::BlockHash> hashes = kv::BlockHashes(kv::HashSeed(fingerprint, r.cache_namespace),
                                                            std::span<const int32_t>(r.prompt).subspan(0, 384));
  ASSERT_EQ(hashes.size(), 3u);
  auto payload_bytes = [&](kvstore::ObjectKind kind, const kv::BlockHash& h) {
    return static_cast<int64_t>(std::filesystem::file_size(kvstore::ObjectPath(dir, fingerprint, {kind, h})));
  };
  int64_t prefix_bytes = payload_bytes(kvstore::ObjectKind::kBoundary, hashes[2]);
  for (const kv::BlockHash& h : hashes) prefix_bytes += payload_bytes(kvstore::ObjectKind::kBlock, h);
  const int64_t block_bytes = payload_bytes(kvstore::ObjectKind::kBlock, hashes[0]);
  // Room for the whole prefix, not for it and one more block.
  auto store = DiskStore(dir, clock, prefix_bytes + block_bytes / 2);
  kvstore::KvStore* raw = store.get();
  const kvstore::ObjectKey head{kvstore::ObjectKind::kBlock, hashes[0]};
  ASSERT_EQ(FetchNow(*raw, {head}), std::vector<bool>{true});
  const kvstore::ObjectKey filler{kvstore::ObjectKind::kBlock, kv::BlockHash{}};
  raw->Put(filler, base::MakeSharedBytes(std::string(static_cast<size_t>(block_bytes), 'x')), 128, "");
  for (int i = 0; i < 3; ++i) {  // hits: worth more than the head, so evicted after it unless the head is pinned
    ASSERT_TRUE(raw->Pin(filler));
    raw->Unpin(filler);
  }
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), std::move(store));
    r.id = "p2";
    ASSERT_TRUE(s.Submit(r, Collect(&second)).ok());
    ASSERT_TRUE(StepUntilDone(s, second));
    EXPECT_EQ(raw->Stats().tiers[0].pinned, 0);  // every pin released after the restore
    raw->Flush();
    EXPECT_EQ(raw->Locate(filler), kvstore::Tier::kDisk);  // evicted from L1 instead of the head
  }
  EXPECT_EQ(second.usage.cached_tokens, 384);
  EXPECT_EQ(second.usage.cached_memory, 128);
  EXPECT_EQ(second.usage.cached_disk, 256);
  EXPECT_EQ(second.tokens[0], first.tokens[0]);
  EXPECT_EQ(second.logprobs[0], first.logprobs[0]);
}

// A request cancelled while its prefix is being fetched from disk leaves no pin behind, whichever
// finishes first, and the loop serves on.
TEST(EngineLoopStoreTest, CancelDuringAFetchReleasesEveryPin) {
  const TempStoreDir temp("fs_serve_cancel_");
  const std::string& dir = temp.path;
  base::SystemClock clock;
  protocol::GenerateRequest r = Request("p", RandomTokens(400, 13), 4, 3);
  Collected first, cancelled, after;
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), DiskStore(dir, clock));
    ASSERT_TRUE(s.Submit(r, Collect(&first)).ok());
    RunUntilDone(s, {&first});
    s.Stop();
  }
  auto store = DiskStore(dir, clock);
  kvstore::KvStore* raw = store.get();
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), std::move(store));
  r.id = "p2";
  ASSERT_TRUE(s.Submit(r, Collect(&cancelled)).ok());
  s.Cancel("p2");
  ASSERT_TRUE(StepUntilDone(s, cancelled));
  EXPECT_EQ(cancelled.finish[0], protocol::FinishReason::kCancelled);
  raw->Flush();  // the fetch has landed (or never started)
  s.StepOnce();  // its result reaches the loop
  EXPECT_EQ(raw->Stats().tiers[0].pinned, 0);
  r.id = "p3";
  ASSERT_TRUE(s.Submit(r, Collect(&after)).ok());
  ASSERT_TRUE(StepUntilDone(s, after));
  EXPECT_EQ(after.tokens[0], first.tokens[0]);
  EXPECT_EQ(raw->Stats().tiers[0].pinned, 0);
}


// The same with the fetch held mid-read, so that the cancel lands while the restore is running:
// the request ends at once with nothing generated, others are served meanwhile, and when the
// read lands every pin is released and the prefix still serves.
TEST(EngineLoopStoreTest, CancelDuringAPausedRestoreServesOthersAndFreesEverything) {
  const TempStoreDir temp("fs_serve_cancel_paused_");
  base::SystemClock clock;
  protocol::GenerateRequest r = Request("p", RandomTokens(400, 17), 4, 3);
  Collected first, cancelled, other, after;
  {
    EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), DiskStore(temp.path, clock));
    ASSERT_TRUE(s.Submit(r, Collect(&first)).ok());
    RunUntilDone(s, {&first});
    s.Stop();
  }
  kvstore::testing::FaultFileSystem fault;
  kvstore::StoreConfig cfg;
  cfg.fingerprint = ModelFingerprint(TestModel(), engine::EngineOptions{});
  cfg.memory_bytes = 64 << 20;
  cfg.disk_dir = temp.path;
  cfg.disk_bytes = 256 << 20;
  cfg.background_gc = false;
  cfg.file_system = &fault;
  auto store = kvstore::KvStore::Open(cfg, clock);
  ASSERT_TRUE(store.ok()) << store.error().ToString();
  kvstore::KvStore* raw = store->get();
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config(), std::move(store).value());
  fault.pause_payload_reads = true;
  r.id = "p2";
  ASSERT_TRUE(s.Submit(r, Collect(&cancelled)).ok());
  for (int i = 0; i < 5000 && fault.paused_reads.load() == 0; ++i) {
    s.StepOnce();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(fault.paused_reads.load(), 0) << "the restore reached the disk";
  s.Cancel("p2");
  ASSERT_TRUE(StepUntilDone(s, cancelled, 5));
  EXPECT_EQ(cancelled.finish[0], protocol::FinishReason::kCancelled);
  EXPECT_TRUE(cancelled.tokens[0].empty());
  EXPECT_EQ(cancelled.usage.completion_tokens, 0);
  EXPECT_EQ(s.Stats().running, 0);
  EXPECT_EQ(s.Stats().state_pool_bytes, 0);
  // Another request is served while that read is still held.
  ASSERT_TRUE(s.Submit(Request("o", RandomTokens(40, 5), 3, 3), Collect(&other)).ok());
  ASSERT_TRUE(StepUntilDone(s, other));
  EXPECT_EQ(other.tokens[0].size(), 3u);
  EXPECT_GT(fault.paused_reads.load(), 0);
  fault.pause_payload_reads = false;
  raw->Flush();
  s.StepOnce();
  EXPECT_EQ(raw->Stats().tiers[0].pinned, 0);
  r.id = "p3";
  ASSERT_TRUE(s.Submit(r, Collect(&after)).ok());
  ASSERT_TRUE(StepUntilDone(s, after));
  EXPECT_EQ(after.tokens[0], first.tokens[0]);
  EXPECT_GT(after.usage.cached_tokens, 0);
  EXPECT_EQ(raw->Stats().tiers[0].pinned, 0);
  EXPECT_EQ(s.Stats().state_pool_bytes, 0);
}

// Cached states are only valid where they continue bit for bit: the fingerprint changes with
// QAT, the reference kernels and, where the CPU has AMX, the AMX switch, and is stable otherwise.
TEST(ModelFingerprintTest, CarriesTheNumerics) {
  const engine::EngineOptions base;
  engine::EngineOptions no_qat = base, reference = base;
  no_qat.qat = false;
  reference.reference_kernels = true;
  const std::string fp = ModelFingerprint(TestModel(), base);
  EXPECT_EQ(fp, ModelFingerprint(TestModel(), base));
  EXPECT_NE(fp, ModelFingerprint(TestModel(), no_qat));
  EXPECT_NE(fp, ModelFingerprint(TestModel(), reference));
  const bool amx = kernels::AmxOn();
  kernels::SetAmx(!amx);
  const std::string flipped = ModelFingerprint(TestModel(), base);
  kernels::SetAmx(amx);
  if (kernels::AmxSupported()) {
    EXPECT_NE(fp, flipped);
  } else {
    EXPECT_EQ(fp, flipped) << "without AMX the switch changes no bits";
  }
  EXPECT_EQ(kernels::NumericsName().rfind(kernels::IsaName(kernels::BestIsa()), 0), 0u) << kernels::NumericsName();
  EXPECT_NE(kernels::NumericsName().find(" r" + std::to_string(kernels::kNumericsRevision)), std::string::npos);
}


// A reasoning budget: no EOS before </think> (even when EOS is all but certain), then </think>
// exactly when the budget is spent, after which the answer may end.
TEST(EngineLoopTest, ReasoningBudgetForcesThinkEndAndKeepsEosOutOfTheReasoning) {
  EngineLoop s(TestModel(), engine::EngineOptions{}, Config());
  const int32_t eos = 1, think_end = 7;
  protocol::GenerateRequest r = Request("budget", RandomTokens(40, 5), 20, 3);
  r.ignore_eos = false;
  r.sampling.logit_bias = {{eos, 100.0f}};  // EOS wins every unmasked step
  r.reasoning_budget = 4;
  r.think_end_token = think_end;
  Collected out;
  ASSERT_TRUE(s.Submit(r, Collect(&out)).ok());
  RunUntilDone(s, {&out});
  const std::vector<int32_t>& t = out.tokens[0];
  ASSERT_EQ(t.size(), 5u) << "four reasoning tokens, then </think>, then EOS (not reported as a token)";
  for (size_t i = 0; i < 4; ++i) EXPECT_NE(t[i], eos);
  EXPECT_EQ(t[4], think_end);
  EXPECT_EQ(out.finish[0], protocol::FinishReason::kStop);
  // Without a budget the same request ends at once.
  protocol::GenerateRequest plain = r;
  plain.id = "plain";
  plain.reasoning_budget = -1;
  Collected free_run;
  ASSERT_TRUE(s.Submit(plain, Collect(&free_run)).ok());
  RunUntilDone(s, {&free_run});
  EXPECT_TRUE(free_run.tokens[0].empty());
  EXPECT_EQ(free_run.finish[0], protocol::FinishReason::kStop);
}

}  // namespace
}  // namespace flashserve::serve
