// TransferCollector: a TransferSink that keeps each transfer's objects until a caller collects
// them with the blocking Await(id, deadline), whether the transfer arrives before or after the
// call. Sink methods run on receiver threads, Await on any thread; every method is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "transfer/receiver.h"
#include "transfer/wire.h"

namespace flashserve::transfer {

struct TransferResult {
  Hello hello;
  std::vector<TransferObject> objects;  // in send order
  EndSummary end;
};

class TransferCollector final : public TransferSink {
 public:
  using Clock = std::chrono::steady_clock;

  // Finished transfers nobody awaited are dropped this long after they finished.
  explicit TransferCollector(double unclaimed_retention_s = 60.0);

  // Waits until transfer `id` ends (its objects), fails (its error) or the deadline passes
  // (kTimeout). The transfer may have started, or even finished, before the call. One Await per
  // id: the outcome is handed out once. A transfer whose Await timed out is abandoned: its
  // remaining objects are dropped on arrival.
  base::Result<TransferResult> Await(const TransferId& id, Clock::time_point deadline);
  // Drops a transfer's objects now (e.g. the caller recomputes instead); later frames are dropped.
  void Forget(const TransferId& id);
  // Transfers held (running, or finished and unclaimed).
  size_t size() const;

  void OnHello(const TransferId& id, const Hello& hello) override;
  void OnObject(const TransferId& id, TransferObject object) override;
  void OnEnd(const TransferId& id, const EndSummary& end) override;
  void OnFailed(const TransferId& id, const base::Error& error) override;

 private:
  struct Entry {
    TransferResult result;
    bool ended = false;
    std::optional<base::Error> error;
    bool abandoned = false;  // awaited in vain or forgotten: keep no objects
    Clock::time_point finished_at{};
    bool finished() const { return ended || error.has_value(); }
  };
  Entry& Find(const TransferId& id);  // mu_ held; creates
  void Finished(const TransferId& id);  // mu_ held; the entry exists
  void PruneLocked();                 // mu_ held

  const Clock::duration retention_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<TransferId, Entry, TransferIdHasher> entries_;
};

}  // namespace flashserve::transfer
