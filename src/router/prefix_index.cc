// PrefixIndex (router/prefix_index.h): a global hash -> entry table whose entries list their
// holders per kind with a private tier mask, plus one shared bit per kind; Match walks the prompt
// once, advancing only the workers that still match.
#include "router/prefix_index.h"

#include <algorithm>
#include <string>

#include "fmt/format.h"

namespace flashserve::router {
namespace {

constexpr uint8_t kMemoryBit = 1, kDiskBit = 2;

uint8_t KindBit(ObjectKind kind) { return kind == ObjectKind::kBlock ? 1 : 2; }
int KindIndex(ObjectKind kind) { return kind == ObjectKind::kBlock ? 0 : 1; }
Tier BestPrivateTier(uint8_t tiers) { return (tiers & kMemoryBit) ? Tier::kMemory : Tier::kDisk; }

}  // namespace

// One Match call. Phase 1: while every prompt block so far is in the shared tier, every worker
// matches; only private holders are touched, and a shared boundary is recorded as a pending
// best that each worker commits lazily (before its counts change, and at the end). Phase 2: from
// the first block not in the shared tier, an explicit list of the workers still matching.
class PrefixIndex::MatchWalk {
 public:
  MatchWalk(const PrefixIndex& index, std::vector<WorkerMatch>* out)
      : index_(index), out_(*out), work_(index.work_), active_(index.active_), next_(index.next_active_) {}

  void Run(std::span<const kv::BlockHash> blocks) {
    const int slots = index_.num_slots();
    out_.assign(slots, WorkerMatch{});
    work_.assign(slots, Work{});
    active_.clear();
    bool phase1 = true;
    for (int64_t i = 0; i < static_cast<int64_t>(blocks.size()); ++i) {
      const Entry* e = index_.Find(blocks[i]);
      if (e == nullptr) break;
      if (phase1 && Phase1Block(*e, i)) {
        phase1_len_ = static_cast<int32_t>(i + 1);
        continue;
      }
      phase1 = false;
      Phase2Block(*e, static_cast<int32_t>(i));
      if (active_.empty()) break;
    }
    for (int w = 0; w < slots; ++w) {
      WorkerMatch& m = out_[w];
      m.live = index_.workers_[w].live;
      if (!m.live) continue;
      Commit(w);
      m.blocks_by_tier[2] = m.blocks - m.blocks_by_tier[0] - m.blocks_by_tier[1];
    }
  }

 private:
  int32_t RunOf(int32_t w) const { return std::max(work_[w].run, phase1_len_); }

  void Count(int32_t w, uint8_t tiers) {
    if (tiers & kMemoryBit) {
      ++work_[w].mem;
    } else {
      ++work_[w].disk;
    }
  }

  void SetBest(int32_t w, int64_t blocks, Tier boundary_tier) {
    WorkerMatch& m = out_[w];
    m.blocks = blocks;
    m.blocks_by_tier[0] = work_[w].mem;
    m.blocks_by_tier[1] = work_[w].disk;
    m.boundary_tier = boundary_tier;
  }

  // Applies the pending shared best if it beats the worker's own; valid because a worker's
  // counts do not change between the pending best being set and its next Commit.
  void Commit(int32_t w) {
    if (out_[w].blocks < pending_shared_best_) SetBest(w, pending_shared_best_, Tier::kShared);
  }

  bool Phase1Block(const Entry& e, int64_t i) {
    if (!(e.shared & KindBit(ObjectKind::kBlock))) return false;
    for (const Holder& h : e.holders[0]) {
      Commit(h.worker);
      Count(h.worker, h.tiers);
    }
    for (const Holder& h : e.holders[1]) SetBest(h.worker, i + 1, BestPrivateTier(h.tiers));
    if (e.shared & KindBit(ObjectKind::kBoundary)) pending_shared_best_ = i + 1;
    return true;
  }

  void Phase2Block(const Entry& e, int32_t i) {
    if (e.shared & KindBit(ObjectKind::kBlock)) {
      for (const Holder& h : e.holders[0]) {
        if (RunOf(h.worker) == i) Count(h.worker, h.tiers);
      }
      for (int32_t w : active_) work_[w].run = i + 1;
    } else {
      next_.clear();
      for (const Holder& h : e.holders[0]) {
        if (RunOf(h.worker) != i) continue;
        Commit(h.worker);
        work_[h.worker].run = i + 1;
        Count(h.worker, h.tiers);
        next_.push_back(h.worker);
      }
      active_.swap(next_);
    }
    for (const Holder& h : e.holders[1]) {
      if (RunOf(h.worker) == i + 1) SetBest(h.worker, i + 1, BestPrivateTier(h.tiers));
    }
    if (e.shared & KindBit(ObjectKind::kBoundary)) {
      for (int32_t w : active_) {
        if (out_[w].blocks < i + 1) SetBest(w, i + 1, Tier::kShared);
      }
    }
  }

  const PrefixIndex& index_;
  std::vector<WorkerMatch>& out_;
  std::vector<Work>& work_;
  std::vector<int32_t>& active_;
  std::vector<int32_t>& next_;
  int32_t phase1_len_ = 0;
  int64_t pending_shared_best_ = 0;
};

PrefixIndex::PrefixIndex(int64_t max_entries_per_worker) : max_entries_per_worker_(max_entries_per_worker) {}

int PrefixIndex::AddWorker() {
  workers_.emplace_back();
  workers_.back().live = true;
  return static_cast<int>(workers_.size()) - 1;
}

bool PrefixIndex::ValidWorker(int worker) const {
  return worker >= 0 && worker < num_slots() && workers_[worker].live;
}

base::Status PrefixIndex::RemoveWorker(int worker) {
  if (!ValidWorker(worker)) return base::MakeError(base::ErrorCode::kNotFound, fmt::format("no worker {}", worker));
  ClearPrivate(worker);
  workers_[worker] = WorkerState{};
  return base::Status::Ok();
}

base::Status PrefixIndex::Apply(int worker, const KvEvent& event) {
  if (!ValidWorker(worker)) return base::MakeError(base::ErrorCode::kNotFound, fmt::format("no worker {}", worker));
  WorkerState& ws = workers_[worker];
  if (event.seq != 0) {
    if (event.seq <= ws.last_seq) {
      ++duplicates_;
      return base::Status::Ok();
    }
    if (ws.last_seq != 0 && event.seq > ws.last_seq + 1) {
      ++gaps_;
      ws.needs_resync = true;
    }
    ws.last_seq = event.seq;
  }
  ++events_;
  const KvObject& o = event.object;
  if (o.kind == ObjectKind::kImage) return base::Status::Ok();  // encoder outputs: not a prefix
  if (o.tier == Tier::kShared) {
    SetShared(o.kind, event.stored, o.hash);
  } else if (event.stored) {
    Store(worker, o.kind, o.tier == Tier::kMemory ? kMemoryBit : kDiskBit, o.hash);
  } else {
    Remove(worker, o.kind, o.tier == Tier::kMemory ? kMemoryBit : kDiskBit, o.hash);
  }
  return base::Status::Ok();
}

base::Status PrefixIndex::Reset(int worker, std::span<const KvObject> snapshot, uint64_t seq) {
  if (!ValidWorker(worker)) return base::MakeError(base::ErrorCode::kNotFound, fmt::format("no worker {}", worker));
  ClearPrivate(worker);
  for (const KvObject& o : snapshot) {
    if (o.tier == Tier::kShared) {
      SetShared(o.kind, true, o.hash);
    } else {
      Store(worker, o.kind, o.tier == Tier::kMemory ? kMemoryBit : kDiskBit, o.hash);
    }
  }
  workers_[worker].needs_resync = false;
  workers_[worker].last_seq = seq;
  return base::Status::Ok();
}

void PrefixIndex::Match(std::span<const kv::BlockHash> prompt_blocks, std::vector<WorkerMatch>* out) const {
  MatchWalk(*this, out).Run(prompt_blocks);
}

const PrefixIndex::Entry* PrefixIndex::Find(const kv::BlockHash& hash) const {
  auto it = slot_of_.find(hash);
  return it == slot_of_.end() ? nullptr : &entries_[it->second];
}

uint32_t PrefixIndex::SlotFor(const kv::BlockHash& hash) {
  auto [it, inserted] = slot_of_.try_emplace(hash, 0);
  if (!inserted) return it->second;
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[slot];
  e.hash = hash;
  e.used = true;
  it->second = slot;
  return slot;
}

void PrefixIndex::MaybeFree(uint32_t slot) {
  Entry& e = entries_[slot];
  if (e.shared != 0 || !e.holders[0].empty() || !e.holders[1].empty()) return;
  slot_of_.erase(e.hash);
  e.holders[0].shrink_to_fit();
  e.holders[1].shrink_to_fit();
  e.used = false;
  free_slots_.push_back(slot);
}

void PrefixIndex::SetShared(ObjectKind kind, bool stored, const kv::BlockHash& hash) {
  const uint8_t bit = KindBit(kind);
  if (stored) {
    Entry& e = entries_[SlotFor(hash)];
    if (!(e.shared & bit)) ++shared_entries_;
    e.shared |= bit;
    return;
  }
  auto it = slot_of_.find(hash);
  if (it == slot_of_.end()) return;
  Entry& e = entries_[it->second];
  if (e.shared & bit) --shared_entries_;
  e.shared &= static_cast<uint8_t>(~bit);
  MaybeFree(it->second);
}

void PrefixIndex::Store(int worker, ObjectKind kind, uint8_t tier_bit, const kv::BlockHash& hash) {
  const uint32_t slot = SlotFor(hash);
  std::vector<Holder>& holders = entries_[slot].holders[KindIndex(kind)];
  for (Holder& h : holders) {
    if (h.worker == worker) {
      h.tiers |= tier_bit;
      return;
    }
  }
  WorkerState& ws = workers_[worker];
  const uint32_t stamp = ws.next_stamp++;
  if (ws.next_stamp == 0) ws.next_stamp = 1;  // 0 means "any" in DropHolder
  holders.push_back(Holder{worker, stamp, tier_bit});
  ws.fifo.push_back(FifoItem{slot, stamp, kind});
  ++ws.entries;
  ++private_entries_;
  EnforceCap(worker);
}

void PrefixIndex::Remove(int worker, ObjectKind kind, uint8_t tier_bit, const kv::BlockHash& hash) {
  auto it = slot_of_.find(hash);
  if (it == slot_of_.end()) return;
  std::vector<Holder>& holders = entries_[it->second].holders[KindIndex(kind)];
  for (Holder& h : holders) {
    if (h.worker != worker) continue;
    h.tiers &= static_cast<uint8_t>(~tier_bit);
    if (h.tiers == 0) {
      DropHolder(worker, it->second, kind, h.stamp);
      CompactFifo(worker);
    }
    return;
  }
}

bool PrefixIndex::DropHolder(int worker, uint32_t slot, ObjectKind kind, uint32_t stamp) {
  Entry& e = entries_[slot];
  if (!e.used) return false;
  std::vector<Holder>& holders = e.holders[KindIndex(kind)];
  for (size_t i = 0; i < holders.size(); ++i) {
    if (holders[i].worker != worker) continue;
    if (stamp != 0 && holders[i].stamp != stamp) return false;
    holders[i] = holders.back();
    holders.pop_back();
    --workers_[worker].entries;
    --private_entries_;
    MaybeFree(slot);
    return true;
  }
  return false;
}

void PrefixIndex::ClearPrivate(int worker) {
  WorkerState& ws = workers_[worker];
  for (const FifoItem& item : ws.fifo) DropHolder(worker, item.slot, item.kind, item.stamp);
  ws.fifo.clear();
  ws.entries = 0;
}

void PrefixIndex::EnforceCap(int worker) {
  if (max_entries_per_worker_ <= 0) return;
  WorkerState& ws = workers_[worker];
  while (ws.entries > max_entries_per_worker_ && !ws.fifo.empty()) {
    const FifoItem item = ws.fifo.front();
    ws.fifo.pop_front();
    if (DropHolder(worker, item.slot, item.kind, item.stamp)) ++evicted_;
  }
}

// Removals leave stale FIFO items behind; rebuild once they outnumber the live ones.
void PrefixIndex::CompactFifo(int worker) {
  WorkerState& ws = workers_[worker];
  if (static_cast<int64_t>(ws.fifo.size()) <= 2 * ws.entries + 64) return;
  std::deque<FifoItem> kept;
  for (const FifoItem& item : ws.fifo) {
    const Entry& e = entries_[item.slot];
    if (!e.used) continue;
    for (const Holder& h : e.holders[KindIndex(item.kind)]) {
      if (h.worker == worker && h.stamp == item.stamp) {
        kept.push_back(item);
        break;
      }
    }
  }
  ws.fifo.swap(kept);
}

PrefixIndexStats PrefixIndex::stats() const {
  PrefixIndexStats s;
  for (const WorkerState& w : workers_) s.workers += w.live ? 1 : 0;
  s.hashes = static_cast<int64_t>(slot_of_.size());
  s.private_entries = private_entries_;
  s.shared_entries = shared_entries_;
  s.events = events_;
  s.duplicates = duplicates_;
  s.gaps = gaps_;
  s.evicted = evicted_;
  return s;
}

}  // namespace flashserve::router
