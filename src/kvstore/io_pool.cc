// I/O pool, rate limiter and bandwidth meter (kvstore/io_pool.h).
#include "kvstore/io_pool.h"

#include <algorithm>
#include <chrono>

#include "base/clock.h"

namespace flashserve::kvstore {

IoPool::IoPool(int num_threads) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { Loop(); });
}

IoPool::~IoPool() { Stop(); }

bool IoPool::Submit(Priority priority, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    (priority == Priority::kRead ? reads_ : writes_).push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

void IoPool::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return reads_.empty() && writes_.empty() && running_ == 0; });
}

void IoPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void IoPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !reads_.empty() || !writes_.empty(); });
    if (reads_.empty() && writes_.empty()) return;  // stopping and nothing left
    std::deque<std::function<void()>>& queue = reads_.empty() ? writes_ : reads_;
    std::function<void()> task = std::move(queue.front());
    queue.pop_front();
    ++running_;
    lock.unlock();
    task();
    task = nullptr;  // release captured payloads before reporting idle
    lock.lock();
    --running_;
    if (reads_.empty() && writes_.empty() && running_ == 0) idle_.notify_all();
  }
}

RateLimiter::RateLimiter(int64_t per_second)
    : per_second_(static_cast<double>(std::max<int64_t>(1, per_second))), tokens_(per_second_ / 10) {}

bool RateLimiter::Acquire(int64_t n, const std::atomic<bool>* cancel) {
  std::unique_lock<std::mutex> lock(mu_);
  const double burst = std::max(1.0, per_second_ / 10);
  for (;;) {
    if (cancel != nullptr && cancel->load()) return false;
    const double now = base::MonotonicSeconds();
    if (last_ > 0) tokens_ = std::min(burst, tokens_ + (now - last_) * per_second_);
    last_ = now;
    if (tokens_ >= static_cast<double>(n) || (tokens_ >= burst && static_cast<double>(n) > burst)) {
      tokens_ -= static_cast<double>(n);
      return true;
    }
    const double wait = std::min(0.05, (static_cast<double>(n) - tokens_) / per_second_);
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::duration<double>(std::max(wait, 0.001)));
    lock.lock();
  }
}

void BandwidthMeter::Record(int64_t bytes, double seconds) {
  if (bytes <= 0 || seconds <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  constexpr double kAlpha = 1.0 / 8;
  if (samples_ == 0) {
    avg_bytes_ = static_cast<double>(bytes);
    avg_seconds_ = seconds;
  } else {
    avg_bytes_ += kAlpha * (static_cast<double>(bytes) - avg_bytes_);
    avg_seconds_ += kAlpha * (seconds - avg_seconds_);
  }
  ++samples_;
}

double BandwidthMeter::BytesPerSecond() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_ == 0 ? prior_ : avg_bytes_ / avg_seconds_;
}

bool BandwidthMeter::measured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_ > 0;
}

}  // namespace flashserve::kvstore
