// KV event ring (kvstore/event_log.h).
#include "kvstore/event_log.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

namespace flashserve::kvstore {

EventLog::EventLog(size_t capacity, std::string epoch) : capacity_(std::max<size_t>(capacity, 1)), epoch_(std::move(epoch)) {}

void EventLog::Append(Tier tier, const ObjectKey& key, bool stored, int64_t expiry) {
  protocol::KvEvent e;
  e.stored = stored;
  e.object.tier = tier;
  e.object.kind = key.kind;
  e.object.hash = key.hash;
  e.object.expiry_unix = stored ? expiry : 0;
  std::lock_guard<std::mutex> lock(mu_);
  e.seq = next_seq_++;
  if (ring_.size() == capacity_) ring_.pop_front();
  ring_.push_back(e);
}

protocol::KvEventPage EventLog::Since(uint64_t after, size_t max) const {
  protocol::KvEventPage page;
  page.epoch = epoch_;
  std::lock_guard<std::mutex> lock(mu_);
  page.last_seq = next_seq_ - 1;
  page.first_seq = ring_.empty() ? next_seq_ : ring_.front().seq;
  if (after > page.last_seq || after + 1 < page.first_seq) {
    page.gap = true;
    return page;
  }
  const size_t start = static_cast<size_t>(after + 1 - page.first_seq);
  for (size_t i = start; i < ring_.size() && page.events.size() < max; ++i) page.events.push_back(ring_[i]);
  return page;
}

uint64_t EventLog::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_seq_ - 1;
}

std::string NewEpoch() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

}  // namespace flashserve::kvstore
