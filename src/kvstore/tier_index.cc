// Tier index (kvstore/tier_index.h).
#include "kvstore/tier_index.h"

#include <algorithm>

namespace flashserve::kvstore {

uint8_t ClassTable::Id(std::string_view name) const {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].name == name) return static_cast<uint8_t>(i);
  }
  return kOtherClass;
}

int64_t TierIndex::Value(const IndexEntry& e) {
  return e.last_use + kHitCreditSeconds * std::min(e.hits, kMaxCreditedHits);
}

const IndexEntry* TierIndex::Find(const ObjectKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void TierIndex::Link(const ObjectKey& key, const IndexEntry& e) {
  by_expiry_.emplace(e.expiry, key);
  if (e.pins == 0) by_value_.emplace(Value(e), key);
  if (e.pins > 0) ++pinned_;
  bytes_ += e.bytes;
  class_objects_[e.ttl_class] += 1;
  class_bytes_[e.ttl_class] += e.bytes;
}

void TierIndex::Unlink(const ObjectKey& key, const IndexEntry& e) {
  by_expiry_.erase({e.expiry, key});
  if (e.pins == 0) by_value_.erase({Value(e), key});
  if (e.pins > 0) --pinned_;
  bytes_ -= e.bytes;
  class_objects_[e.ttl_class] -= 1;
  class_bytes_[e.ttl_class] -= e.bytes;
}

void TierIndex::Insert(const ObjectKey& key, IndexEntry entry) {
  auto it = entries_.find(key);
  bool announce = true;
  if (it != entries_.end()) {
    entry.pins = it->second.pins;
    announce = entry.expiry != it->second.expiry;
    Unlink(key, it->second);
    it->second = std::move(entry);
  } else {
    it = entries_.emplace(key, std::move(entry)).first;
  }
  Link(key, it->second);
  if (observer_ && announce) observer_(key, true, it->second.expiry);
}

bool TierIndex::Erase(const ObjectKey& key, IndexEntry* erased) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  Unlink(key, it->second);
  if (erased != nullptr) *erased = std::move(it->second);
  entries_.erase(it);
  if (observer_) observer_(key, false, 0);
  return true;
}

void TierIndex::Touch(const ObjectKey& key, int64_t now, int64_t hits) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  Unlink(key, it->second);
  it->second.last_use = std::max(it->second.last_use, now);
  it->second.hits += hits;
  Link(key, it->second);
}

void TierIndex::AddPins(const ObjectKey& key, int32_t delta) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  Unlink(key, it->second);
  it->second.pins = std::max(0, it->second.pins + delta);
  Link(key, it->second);
}

void TierIndex::SetExpiry(const ObjectKey& key, int64_t expiry) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  Unlink(key, it->second);
  it->second.expiry = expiry;
  Link(key, it->second);
  if (observer_) observer_(key, true, expiry);
}

bool TierIndex::PickVictim(int64_t now, const std::function<bool(const ObjectKey&)>& skip, ObjectKey* victim) const {
  for (auto it = by_expiry_.begin(); it != by_expiry_.end() && it->first <= now; ++it) {
    if (entries_.at(it->second).pins > 0 || (skip && skip(it->second))) continue;
    *victim = it->second;
    return true;
  }
  for (const auto& [value, key] : by_value_) {
    if (skip && skip(key)) continue;
    *victim = key;
    return true;
  }
  return false;
}

std::vector<ObjectKey> TierIndex::Expired(int64_t now, size_t max,
                                          const std::function<bool(const ObjectKey&)>& skip) const {
  std::vector<ObjectKey> out;
  for (auto it = by_expiry_.begin(); it != by_expiry_.end() && it->first <= now && out.size() < max; ++it) {
    if (entries_.at(it->second).pins > 0 || (skip && skip(it->second))) continue;
    out.push_back(it->second);
  }
  return out;
}

void TierIndex::FillSizes(int64_t now, TierStats* stats) const {
  stats->objects = size();
  stats->bytes = bytes();
  stats->pinned = pinned();
  stats->gc_backlog = CountExpired(now);
}

void TierIndex::AddClassStats(Tier tier, std::vector<ClassStats>* classes) const {
  const int t = static_cast<int>(tier);
  for (size_t i = 0; i < classes->size(); ++i) {
    const uint8_t id = i + 1 == classes->size() ? kOtherClass : static_cast<uint8_t>(i);
    (*classes)[i].objects[t] += class_objects(id);
    (*classes)[i].bytes[t] += class_bytes(id);
  }
}

int64_t TierIndex::CountExpired(int64_t now) const {
  int64_t n = 0;
  for (auto it = by_expiry_.begin(); it != by_expiry_.end() && it->first <= now; ++it) ++n;
  return n;
}

std::vector<ObjectKey> TierIndex::Keys() const {
  std::vector<ObjectKey> keys;
  keys.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) keys.push_back(key);
  return keys;
}

void TierIndex::ForEach(const std::function<void(const ObjectKey&, const IndexEntry&)>& fn) const {
  for (const auto& [key, entry] : entries_) fn(key, entry);
}

void TierIndex::Clear() {
  if (observer_)
    for (const auto& [key, entry] : entries_) observer_(key, false, 0);
  entries_.clear();
  by_expiry_.clear();
  by_value_.clear();
  bytes_ = pinned_ = 0;
  std::fill(std::begin(class_objects_), std::end(class_objects_), 0);
  std::fill(std::begin(class_bytes_), std::end(class_bytes_), 0);
}

}  // namespace flashserve::kvstore
