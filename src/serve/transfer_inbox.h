// TransferInbox (decode side of disaggregated serving): the TransferSink of this worker's
// TransferReceiver. Objects a prefill worker streams are imported into the prefix cache as they
// arrive; a request that names the transfer waits (without blocking a thread) until the transfer
// ends, fails, or sends no HELLO within a timeout, then runs, resuming from the imported state or
// recomputing. Sink calls come from receiver threads, Expect from any thread; thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "serve/service.h"
#include "transfer/receiver.h"

namespace flashserve::serve {

class TransferInbox final : public transfer::TransferSink {
 public:
  struct Outcome {
    bool ok = false;                    // END arrived: every object is imported
    int64_t source_cached_tokens = -1;  // the prefill worker's cache hits (from END)
    int64_t objects = 0;
    std::string error;                  // why not ok (failure, no HELLO in time)
  };
  using DoneFn = std::function<void(const Outcome&)>;

  // service receives the objects (ImportObject); hello_timeout_s bounds the wait for a transfer
  // that never starts (its prefill worker is dead or never got the request).
  explicit TransferInbox(Service* service, double hello_timeout_s = 1.0);
  ~TransferInbox() override;  // stops the watchdog; pending DoneFns are dropped
  TransferInbox(const TransferInbox&) = delete;
  TransferInbox& operator=(const TransferInbox&) = delete;

  // Calls done exactly once: at once when transfer `id` already finished, else on the thread
  // that finishes it (receiver or watchdog). done must be quick (post work elsewhere).
  void Expect(const transfer::TransferId& id, DoneFn done);

  void OnHello(const transfer::TransferId& id, const transfer::Hello& hello) override;
  void OnObject(const transfer::TransferId& id, transfer::TransferObject object) override;
  void OnEnd(const transfer::TransferId& id, const transfer::EndSummary& end) override;
  void OnFailed(const transfer::TransferId& id, const base::Error& error) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    bool hello = false, finished = false;
    Outcome outcome;
    DoneFn done;
    Clock::time_point created = Clock::now();
    Clock::time_point deadline{};  // for a HELLO, once expected
  };
  void Finish(const transfer::TransferId& id, Outcome outcome);
  void Watch();

  Service* service_;
  const Clock::duration hello_timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::unordered_map<transfer::TransferId, Entry, transfer::TransferIdHasher> entries_;
  std::thread watchdog_;
};

}  // namespace flashserve::serve
