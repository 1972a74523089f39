// TransferInbox (decode side of disaggregated serving): the TransferSink of this worker's
// TransferReceiver. Objects of a transfer that a request named (Expect) are imported into the
// prefix cache as they arrive; objects arriving before that request are held (bounded) and
// imported when it comes, and never imported when no request names the transfer, so a stranger
// who can reach the transfer port cannot plant cache entries without a live 128-bit transfer id.
// A waiting request runs (resume or recompute) when its transfer ends, fails, or sends no HELLO
// within a timeout. Sink calls come from receiver threads, Expect from any thread; thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

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
  // max_held_bytes bounds objects held for transfers no request has named yet (beyond it such
  // objects are dropped, and that transfer's request recomputes what is missing).
  explicit TransferInbox(Service* service, double hello_timeout_s = 1.0, int64_t max_held_bytes = int64_t{1} << 30);
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
    bool expected = false;             // a request named this transfer: import on arrival
    std::vector<CacheObject> held;     // arrived before that request
    Clock::time_point created = Clock::now();
    Clock::time_point deadline{};  // for a HELLO, once expected
  };
  void Finish(const transfer::TransferId& id, Outcome outcome);
  void Watch();

  Service* service_;
  const Clock::duration hello_timeout_;
  const int64_t max_held_bytes_;
  int64_t held_bytes_ = 0;  // mu_
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::unordered_map<transfer::TransferId, Entry, transfer::TransferIdHasher> entries_;
  std::thread watchdog_;
};

}  // namespace flashserve::serve
