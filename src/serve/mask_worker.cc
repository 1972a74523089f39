// MaskWorker (serve/mask_worker.h).
#include "serve/mask_worker.h"

namespace flashserve::serve {

MaskWorker::MaskWorker() : thread_([this] { Loop(); }) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskWorker::Start(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskWorker::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

void MaskWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || (busy_ && job_); });
    if (stop_) return;
    std::function<void()> job = std::move(job_);
    job_ = nullptr;
    lock.unlock();
    job();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace flashserve::serve
