// The KV store's I/O machinery: IoPool (worker threads draining a read queue before a write
// queue), RateLimiter (paces GC deletes) and BandwidthMeter (moving-average read bandwidth for
// fetch-or-recompute). All three are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashserve::kvstore {

class IoPool {
 public:
  enum class Priority { kRead, kWrite };
  explicit IoPool(int num_threads);
  ~IoPool();  // Stop()
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Queues a task; false (task dropped) once stopping.
  bool Submit(Priority priority, std::function<void()> task);
  // Blocks until both queues are empty and no task is running.
  void Drain();
  // Runs what is queued, then joins the threads. Idempotent.
  void Stop();
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> reads_, writes_;
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Token bucket over real time: Acquire(n) returns once n more operations fit within
// `per_second` (burst of one tenth of a second), sleeping in between. Returns false as soon as
// *cancel becomes true.
class RateLimiter {
 public:
  explicit RateLimiter(int64_t per_second);
  bool Acquire(int64_t n, const std::atomic<bool>* cancel);

 private:
  std::mutex mu_;
  double per_second_;
  double tokens_;
  double last_ = 0;  // steady seconds
};

// Exponential moving averages of bytes and seconds per sample (alpha 1/8, weighted equally per
// sample): bandwidth = avg bytes / avg seconds, the prior until the first sample.
class BandwidthMeter {
 public:
  explicit BandwidthMeter(double prior_bytes_per_second) : prior_(prior_bytes_per_second) {}
  void Record(int64_t bytes, double seconds);
  double BytesPerSecond() const;
  bool measured() const;

 private:
  mutable std::mutex mu_;
  double prior_;
  double avg_bytes_ = 0, avg_seconds_ = 0;
  int64_t samples_ = 0;
};

}  // namespace flashserve::kvstore
