// EventLog: the numbered KV events of one store (objects stored in / removed from its tiers),
// kept in a bounded ring so the router can follow them and detect gaps (design.md section 6).
// Appended by the tier indexes under their locks; read by the API. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "kvstore/kv_store.h"
#include "protocol/cluster.h"

namespace flashserve::kvstore {

class EventLog {
 public:
  // epoch: names this store's lifetime (a restart starts a new numbering).
  EventLog(size_t capacity, std::string epoch);

  void Append(Tier tier, const ObjectKey& key, bool stored, int64_t expiry);
  // Events with seq > after, at most max. gap when events after `after` were already dropped
  // from the ring, or `after` is beyond the last event (another epoch's numbering).
  protocol::KvEventPage Since(uint64_t after, size_t max) const;
  uint64_t last_seq() const;
  const std::string& epoch() const { return epoch_; }

 private:
  const size_t capacity_;
  const std::string epoch_;
  mutable std::mutex mu_;
  std::deque<protocol::KvEvent> ring_;
  uint64_t next_seq_ = 1;
};

// A fresh random epoch id (16 hex digits).
std::string NewEpoch();

}  // namespace flashserve::kvstore
