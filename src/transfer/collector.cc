// Collecting transfers for blocking callers (transfer/collector.h).
#include "transfer/collector.h"

#include "fmt/format.h"

namespace flashserve::transfer {

TransferCollector::TransferCollector(double unclaimed_retention_s)
    : retention_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(unclaimed_retention_s))) {}

base::Result<TransferResult> TransferCollector::Await(const TransferId& id, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool done = changed_.wait_until(lock, deadline, [&] {
    auto it = entries_.find(id);
    return it != entries_.end() && it->second.finished() && !it->second.abandoned;
  });
  auto it = entries_.find(id);
  if (!done) {
    if (it != entries_.end()) {
      it->second.abandoned = true;  // no one will collect it: stop keeping its objects
      it->second.result.objects.clear();
      if (it->second.finished()) entries_.erase(it);
    }
    return base::Error(base::ErrorCode::kTimeout,
                       fmt::format("transfer {} {} before the deadline", ToHex(id),
                                   it == entries_.end() ? "did not arrive" : "did not finish"));
  }
  Entry entry = std::move(it->second);
  entries_.erase(it);
  if (entry.error) return *entry.error;
  return std::move(entry.result);
}

void TransferCollector::Forget(const TransferId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (it->second.finished()) {
    entries_.erase(it);
    return;
  }
  it->second.abandoned = true;
  it->second.result.objects.clear();
}

size_t TransferCollector::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void TransferCollector::OnHello(const TransferId& id, const Hello& hello) {
  std::lock_guard<std::mutex> lock(mu_);
  PruneLocked();
  Entry& entry = entries_[id];
  if (entry.finished()) entry = Entry{};  // an id reused after an unclaimed transfer
  entry.result.hello = hello;
}

void TransferCollector::OnObject(const TransferId& id, TransferObject object) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.abandoned) return;
  it->second.result.objects.push_back(std::move(object));
}

void TransferCollector::OnEnd(const TransferId& id, const EndSummary& end) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.ended = true;
  it->second.result.end = end;
  Finished(id);
}

void TransferCollector::OnFailed(const TransferId& id, const base::Error& error) {
  std::lock_guard<std::mutex> lock(mu_);
  PruneLocked();
  Entry& entry = entries_[id];  // may be the first word of this id (a refused HELLO)
  entry.error = error;
  entry.result.objects.clear();
  Finished(id);
}

void TransferCollector::Finished(const TransferId& id) {
  auto it = entries_.find(id);
  it->second.finished_at = Clock::now();
  if (it->second.abandoned) {
    entries_.erase(it);  // no one will collect it
    return;
  }
  changed_.notify_all();
}

void TransferCollector::PruneLocked() {
  const Clock::time_point now = Clock::now();
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.finished() && now - it->second.finished_at > retention_) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace flashserve::transfer
