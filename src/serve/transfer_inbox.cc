// Decode-side transfer inbox (serve/transfer_inbox.h).
#include "serve/transfer_inbox.h"

#include <vector>

#include "base/log.h"

namespace flashserve::serve {

namespace {
constexpr auto kWatchInterval = std::chrono::milliseconds(50);
constexpr auto kUnclaimedRetention = std::chrono::seconds(60);  // finished transfers nobody expected
}  // namespace

TransferInbox::TransferInbox(Service* service, double hello_timeout_s, int64_t max_held_bytes)
    : service_(service),
      hello_timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(hello_timeout_s))),
      max_held_bytes_(max_held_bytes),
      watchdog_([this] { Watch(); }) {}

TransferInbox::~TransferInbox() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  watchdog_.join();
}

void TransferInbox::Expect(const transfer::TransferId& id, DoneFn done) {
  std::unique_lock<std::mutex> lock(mu_);
  Entry& e = entries_[id];
  std::vector<CacheObject> held = std::move(e.held);
  for (const CacheObject& o : held) held_bytes_ -= static_cast<int64_t>(o.payload->size());
  e.held.clear();
  e.expected = true;
  if (e.finished) {
    Outcome outcome = e.outcome;
    entries_.erase(id);
    lock.unlock();
    for (const CacheObject& o : held) service_->ImportObject(o);
    done(outcome);
    return;
  }
  e.done = std::move(done);
  e.deadline = Clock::now() + hello_timeout_;
  lock.unlock();
  for (const CacheObject& o : held) service_->ImportObject(o);
}

void TransferInbox::OnHello(const transfer::TransferId& id, const transfer::Hello&) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[id].hello = true;
}

void TransferInbox::OnObject(const transfer::TransferId& id, transfer::TransferObject object) {
  CacheObject o{object.kind, object.hash, object.tokens, std::move(object.payload)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[id];
    ++e.outcome.objects;
    if (!e.expected) {  // no request has named this transfer (yet): hold, within the bound
      const int64_t bytes = static_cast<int64_t>(o.payload->size());
      if (held_bytes_ + bytes <= max_held_bytes_) {
        held_bytes_ += bytes;
        e.held.push_back(std::move(o));
      }
      return;
    }
  }
  service_->ImportObject(o);
}

void TransferInbox::OnEnd(const transfer::TransferId& id, const transfer::EndSummary& end) {
  Outcome outcome;
  outcome.ok = true;
  outcome.source_cached_tokens = end.source_cached_tokens;
  Finish(id, outcome);
}

void TransferInbox::OnFailed(const transfer::TransferId& id, const base::Error& error) {
  FS_LOG(kWarning, "transfer {} failed: {}; the request recomputes its prompt", transfer::ToHex(id), error.message());
  Outcome outcome;
  outcome.error = error.message();
  Finish(id, outcome);
}

void TransferInbox::Finish(const transfer::TransferId& id, Outcome outcome) {
  DoneFn done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[id];
    outcome.objects = e.outcome.objects;
    if (!e.done) {  // the request has not asked yet: keep the outcome for Expect
      e.finished = true;
      e.outcome = outcome;
      e.deadline = Clock::now();
      return;
    }
    done = std::move(e.done);
    entries_.erase(id);
  }
  done(outcome);
}

void TransferInbox::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, kWatchInterval, [this] { return stop_; });
    const Clock::time_point now = Clock::now();
    std::vector<DoneFn> timed_out;
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (e.done && !e.hello && now >= e.deadline) {
        timed_out.push_back(std::move(e.done));
        it = entries_.erase(it);
      } else if (!e.expected && now - e.created > kUnclaimedRetention) {  // nobody named it: drop
        for (const CacheObject& o : e.held) held_bytes_ -= static_cast<int64_t>(o.payload->size());
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    if (timed_out.empty()) continue;
    lock.unlock();
    Outcome outcome;
    outcome.error = "no transfer arrived in time (is the prefill worker up?)";
    for (DoneFn& done : timed_out) done(outcome);
    lock.lock();
  }
}

}  // namespace flashserve::serve
