#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace flashserve::base {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, 3, [&](int64_t b, int64_t e) {
        EXPECT_LT(b, e);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
    }
  }
}

TEST(ThreadPoolTest, TasksAreTakenOneAtATime) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 40}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelTasks(n, [&](int64_t b, int64_t e) {
        EXPECT_EQ(e, b + 1);
        hits[static_cast<size_t>(b)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
    }
  }
  // Task 0 waits until the 39 others are done: only a thread that holds no other task while it
  // waits lets them finish (ParallelFor would give it a chunk of 5 of these 40).
  ThreadPool pool(2);
  std::atomic<int> done{0};
  std::atomic<bool> waited_out{false};
  pool.ParallelTasks(40, [&](int64_t b, int64_t) {
    if (b == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (done.load() < 39)
        if (std::chrono::steady_clock::now() > deadline) {
          waited_out = true;
          return;
        }
      return;
    }
    done.fetch_add(1);
  });
  EXPECT_FALSE(waited_out.load());
  EXPECT_EQ(done.load(), 39);
  // A single task runs on the caller, outside any job, so its own loops still use the pool.
  std::thread::id single;
  std::atomic<int> chunks{0};
  pool.ParallelTasks(1, [&](int64_t, int64_t) {
    single = std::this_thread::get_id();
    pool.ParallelFor(1000, 1, [&](int64_t, int64_t) { ++chunks; });
  });
  EXPECT_EQ(single, std::this_thread::get_id());
  EXPECT_GT(chunks.load(), 1);
  // Inside another parallel loop they run inline, still one call per task.
  std::atomic<int> calls{0};
  pool.ParallelFor(2, 1, [&](int64_t, int64_t) {
    pool.ParallelTasks(3, [&](int64_t b, int64_t e) {
      EXPECT_EQ(e, b + 1);
      calls.fetch_add(1);
    });
  });
  EXPECT_EQ(calls.load(), 6);
}

TEST(ThreadPoolTest, NestedCallsFromTheCallersChunksRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.ParallelFor(100, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 6400);
}

TEST(ThreadPoolTest, ManyConsecutiveJobsAndNestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 2000; ++rep) {
    pool.ParallelFor(16, 1, [&](int64_t b, int64_t e) {
      pool.ParallelFor(4, 1, [&](int64_t b2, int64_t e2) { total += (e - b) * (e2 - b2); });
    });
  }
  EXPECT_EQ(total.load(), 2000 * 16 * 4);
}

// Both tasks of each job meet (so the worker runs one of them); the worker's task then outlasts
// the caller's polling, so the caller must sleep until it is done. Between jobs the pool idles
// longer than the workers poll, so each job must wake a sleeping worker.
TEST(ThreadPoolTest, CallerWaitsPastItsPollingAndSleepingWorkersWake) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int job = 0; job < 3; ++job) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::atomic<int> arrived{0};
    std::atomic<bool> met{true}, worker_done{false};
    pool.ParallelTasks(2, [&](int64_t, int64_t) {
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (arrived.load() < 2)
        if (std::chrono::steady_clock::now() > deadline) {
          met = false;
          return;
        }
      if (std::this_thread::get_id() == caller) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      worker_done = true;
    });
    EXPECT_TRUE(met.load()) << "job " << job << ": no worker took the second task";
    EXPECT_TRUE(worker_done.load()) << "job " << job << ": returned before the worker's task ended";
  }
}

}  // namespace
}  // namespace flashserve::base
