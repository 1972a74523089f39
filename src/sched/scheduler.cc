// Scheduler (sched/scheduler.h).
#include "sched/scheduler.h"

#include <algorithm>

namespace flashserve::sched {

using base::Error;
using base::ErrorCode;

base::Status SchedConfig::Validate() const {
  if (max_step_tokens < 1) return Error(ErrorCode::kInvalidArgument, "max step tokens must be >= 1");
  if (max_running < 1) return Error(ErrorCode::kInvalidArgument, "max running sequences must be >= 1");
  if (max_waiting < 1) return Error(ErrorCode::kInvalidArgument, "max waiting requests must be >= 1");
  if (state_pool_bytes < 1) return Error(ErrorCode::kInvalidArgument, "state pool must be > 0 bytes");
  if (persist_every_blocks < 0 || block_tokens < 1) return Error(ErrorCode::kInvalidArgument, "bad persist interval");
  return base::Status::Ok();
}

Scheduler::Scheduler(const SchedConfig& config, StateBytesFn state_bytes)
    : config_(config), state_bytes_(std::move(state_bytes)) {}

base::Status Scheduler::Add(Sequence seq) {
  if (num_waiting() >= config_.max_waiting)
    return Error(ErrorCode::kResourceExhausted, "the request queue is full (" + std::to_string(config_.max_waiting) + ")");
  seq.status = SeqStatus::kWaiting;
  seq.num_computed = 0;
  seq.pool_bytes = 0;
  waiting_.push_back(seq.id);
  seqs_[seq.id] = std::move(seq);
  return base::Status::Ok();
}

bool Scheduler::Fork(uint64_t parent_id, uint64_t child_id) {
  Sequence* parent = Find(parent_id);
  if (parent == nullptr || seqs_.count(child_id)) return false;
  Sequence child = *parent;
  child.id = child_id;
  child.pool_bytes = 0;
  const int64_t need = state_bytes_(child.num_computed);
  if (parent->status != SeqStatus::kRunning || num_running() >= config_.max_running ||
      pool_used_ + need > config_.state_pool_bytes) {
    child.status = SeqStatus::kWaiting;
    child.num_computed = 0;
    waiting_.push_front(child_id);
    seqs_[child_id] = std::move(child);
    return false;
  }
  child.pool_bytes = need;
  pool_used_ += need;
  child.admitted_order = ++admit_counter_;
  running_.push_back(child_id);
  seqs_[child_id] = std::move(child);
  return true;
}

bool Scheduler::Remove(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  pool_used_ -= it->second.pool_bytes;
  std::erase(running_, id);
  std::erase(waiting_, id);
  seqs_.erase(it);
  return true;
}

Sequence* Scheduler::Find(uint64_t id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

int64_t Scheduler::NextPersistPoint(const Sequence& s) const {
  const int64_t block = config_.block_tokens, total = static_cast<int64_t>(s.tokens.size());
  int64_t next = total;
  // End of input: the last block boundary before the final prompt token (which must be fed).
  const int64_t end_of_input = ((s.num_prompt - 1) / block) * block;
  if (end_of_input > s.num_computed) next = std::min(next, end_of_input);
  if (config_.persist_every_blocks > 0) {
    const int64_t every = config_.persist_every_blocks * block;
    const int64_t periodic = (s.num_computed / every + 1) * every;
    if (periodic < s.num_prompt) next = std::min(next, periodic);
  }
  return next;
}

int64_t Scheduler::ChunkLength(const Sequence& s, int64_t budget) const {
  const int64_t remaining = static_cast<int64_t>(s.tokens.size()) - s.num_computed;
  return std::min({remaining, budget, NextPersistPoint(s) - s.num_computed});
}

bool Scheduler::InPlan(const StepPlan& plan, uint64_t id) const {
  return std::any_of(plan.items.begin(), plan.items.end(), [&](const StepItem& i) { return i.seq_id == id; });
}

void Scheduler::Preempt(Sequence& s, StepPlan* plan) {
  pool_used_ -= s.pool_bytes;
  s.pool_bytes = 0;
  s.num_computed = 0;
  s.status = SeqStatus::kWaiting;
  ++s.num_preemptions;
  ++num_preemptions_;
  std::erase(running_, s.id);
  waiting_.push_front(s.id);
  plan->preempted.push_back(s.id);
}

bool Scheduler::Reserve(Sequence& s, int64_t new_position, StepPlan* plan, bool may_preempt) {
  const int64_t need = state_bytes_(new_position) - s.pool_bytes;
  while (pool_used_ + need > config_.state_pool_bytes) {
    if (!may_preempt) return false;
    // Victim: the most recently admitted running sequence not already in this step.
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      Sequence& v = seqs_[*it];
      if (v.id != s.id && !InPlan(*plan, v.id)) {
        victim = &v;
        break;
      }
    }
    if (victim == nullptr || victim->admitted_order < s.admitted_order) return false;
    Preempt(*victim, plan);
  }
  pool_used_ += need;
  s.pool_bytes += need;
  return true;
}

void Scheduler::AddItem(Sequence& s, int64_t len, StepPlan* plan) {
  StepItem item;
  item.seq_id = s.id;
  item.begin = s.num_computed;
  item.end = s.num_computed + len;
  item.sample = item.end == static_cast<int64_t>(s.tokens.size());
  item.persist = item.end % config_.block_tokens == 0 && (item.end == NextPersistPoint(s) || item.sample);
  plan->items.push_back(item);
  plan->num_tokens += len;
}

void Scheduler::ScheduleRunning(StepPlan* plan) {
  for (bool decode_pass : {true, false}) {
    const std::vector<uint64_t> order = running_;  // preemption edits running_
    for (uint64_t id : order) {
      auto it = seqs_.find(id);
      if (it == seqs_.end() || it->second.status != SeqStatus::kRunning || InPlan(*plan, id)) continue;
      Sequence& s = it->second;
      const bool is_decode = static_cast<int64_t>(s.tokens.size()) - s.num_computed == 1;
      if (is_decode != decode_pass) continue;
      const int64_t len = ChunkLength(s, config_.max_step_tokens - plan->num_tokens);
      if (len <= 0) continue;
      if (!Reserve(s, s.num_computed + len, plan, /*may_preempt=*/true)) {
        Preempt(s, plan);  // nothing younger to evict: this one yields
        continue;
      }
      AddItem(s, len, plan);
    }
  }
}

void Scheduler::AdmitWaiting(const AdmitHooks& admit, StepPlan* plan) {
  while (!waiting_.empty() && num_running() < config_.max_running && plan->num_tokens < config_.max_step_tokens) {
    Sequence& s = seqs_[waiting_.front()];
    const int64_t cached = std::min<int64_t>(admit.probe(s), static_cast<int64_t>(s.tokens.size()) - 1);
    s.num_computed = std::max<int64_t>(0, cached);
    const int64_t len = ChunkLength(s, config_.max_step_tokens - plan->num_tokens);
    s.num_computed = 0;
    if (len <= 0 || !Reserve(s, cached + len, plan, /*may_preempt=*/false)) break;
    waiting_.pop_front();
    s.status = SeqStatus::kRunning;
    s.admitted_order = ++admit_counter_;
    running_.push_back(s.id);
    s.num_computed = cached > 0 ? admit.restore(s, cached) : 0;
    AddItem(s, ChunkLength(s, config_.max_step_tokens - plan->num_tokens), plan);
  }
}

StepPlan Scheduler::Plan(const AdmitHooks& admit) {
  StepPlan plan;
  ScheduleRunning(&plan);
  AdmitWaiting(admit, &plan);
  return plan;
}

void Scheduler::Commit(const StepItem& item, std::optional<int32_t> sampled) {
  Sequence* s = Find(item.seq_id);
  if (s == nullptr) return;
  s->num_computed = item.end;
  if (sampled) s->tokens.push_back(*sampled);
}

int64_t Scheduler::PendingPromptTokens() const {
  int64_t total = 0;
  for (const auto& [id, s] : seqs_) total += std::max<int64_t>(0, s.num_prompt - s.num_computed);
  return total;
}

}  // namespace flashserve::sched
