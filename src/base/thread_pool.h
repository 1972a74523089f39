// A fixed pool of worker threads for data-parallel kernels: ParallelFor splits [0, n) into
// chunks, ParallelTasks hands out single items; both run on the workers and the calling thread.
// One caller at a time (the engine thread); a call issued from inside a chunk (on a worker or on
// the caller) runs inline. Which thread runs a chunk never changes what a chunk computes, so
// results do not depend on the thread count. Waiting threads poll about 1 ms before they sleep
// (the caller for the workers' last chunks, the workers for the next job; thread_pool.cc), so a
// pool keeps its cores busy for that long after each job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashserve::base {

class ThreadPool {
 public:
  // num_threads counts the caller: 1 means no worker threads. 0 = hardware concurrency.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); chunks hold >= grain items
  // (about four chunks per thread).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // Calls fn(i, i + 1) for every i in [0, n), each thread taking the next item when it is done:
  // for a few heavy items of uneven cost (ordered largest first, the last ones leave the least
  // idle time).
  void ParallelTasks(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t n = 0;
    int64_t chunk = 1;
    std::atomic<int64_t> next{0};
    std::atomic<int> active{0};
  };
  void Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);
  void WorkerLoop();
  void RunChunks(Job* job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  Job* job_ = nullptr;
  int spin_iterations_ = 0;  // polling before a futex sleep (thread_pool.cc)
};

}  // namespace flashserve::base
