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

void Scheduler::Add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  seq->num_computed = 0;
  seq->pool_bytes = 0;
  waiting_.push_back(seq);
}

bool Scheduler::Fork(const Sequence& parent, Sequence* child) {
  const uint64_t id = child->id;
  *child = parent;
  child->id = id;
  child->pool_bytes = 0;
  child->num_preemptions = 0;
  const int64_t need = state_bytes_(child->num_computed);
  if (parent.status != SeqStatus::kRunning || num_running() >= config_.max_running ||
      pool_used_ + need > config_.state_pool_bytes) {
    child->status = SeqStatus::kWaiting;
    child->num_computed = 0;
    waiting_.push_front(child);
    return false;
  }
  child->pool_bytes = need;
  pool_used_ += need;
  child->admitted_order = ++admit_counter_;
  running_.push_back(child);
  return true;
}

bool Scheduler::Remove(Sequence* seq) {
  const size_t before = running_.size() + waiting_.size();
  std::erase(running_, seq);
  std::erase(waiting_, seq);
  if (running_.size() + waiting_.size() == before) return false;
  pool_used_ -= seq->pool_bytes;
  seq->pool_bytes = 0;
  return true;
}

namespace {
// A snapshot point inside an atomic range moved back to the block boundary before the range (no
// snapshot can sit inside one). Ranges are visited from the last one down, so a point moved out
// of one is checked against those before it.
int64_t PointOutsideRanges(const Sequence& s, int64_t point, int64_t block) {
  for (auto it = s.atomic_ranges.rbegin(); it != s.atomic_ranges.rend(); ++it)
    if (it->first < point && point < it->second) point = it->first / block * block;
  return point;
}
}  // namespace

int64_t Scheduler::NextPersistPoint(const Sequence& s) const {
  const int64_t block = config_.block_tokens, total = static_cast<int64_t>(s.tokens.size());
  int64_t next = total;
  const auto consider = [&](int64_t point) {
    point = PointOutsideRanges(s, point, block);
    if (point > s.num_computed) next = std::min(next, point);
  };
  // End of input: the last block boundary before the final prompt token (which must be fed).
  consider(((s.num_prompt - 1) / block) * block);
  if (s.input_limit < s.num_prompt) consider((s.input_limit / block) * block);  // the text before a picture still encoding
  if (config_.persist_every_blocks > 0) {
    const int64_t every = config_.persist_every_blocks * block;
    int64_t periodic = (s.num_computed / every + 1) * every;
    while (periodic < s.num_prompt && PointOutsideRanges(s, periodic, block) <= s.num_computed) periodic += every;
    if (periodic < s.num_prompt) consider(periodic);
  }
  return next;
}

namespace {
// The end of a chunk [from, end) moved out of any atomic range it would cut: back to the range's
// start, or (when the chunk starts there) on to its end.
int64_t ChunkEndOutsideRanges(const Sequence& s, int64_t from, int64_t end) {
  for (const auto& [first, last] : s.atomic_ranges) {
    if (first >= end) break;
    if (end < last && from < last) return first > from ? first : last;
  }
  return end;
}
}  // namespace

int64_t Scheduler::ChunkLength(const Sequence& s, int64_t budget) const {
  const int64_t remaining = static_cast<int64_t>(s.tokens.size()) - s.num_computed;
  const int64_t len = std::min({remaining, budget, NextPersistPoint(s) - s.num_computed, s.input_limit - s.num_computed});
  if (len <= 0 || s.atomic_ranges.empty()) return len;
  return ChunkEndOutsideRanges(s, s.num_computed, s.num_computed + len) - s.num_computed;
}

bool Scheduler::InPlan(const StepPlan& plan, const Sequence* s) {
  return std::any_of(plan.items.begin(), plan.items.end(), [&](const StepItem& i) { return i.seq == s; });
}

void Scheduler::Preempt(Sequence& s, StepPlan* plan) {
  pool_used_ -= s.pool_bytes;
  s.pool_bytes = 0;
  s.num_computed = 0;
  s.status = SeqStatus::kWaiting;
  ++s.num_preemptions;
  ++num_preemptions_;
  std::erase(running_, &s);
  waiting_.push_front(&s);
  plan->preempted.push_back(&s);
}

bool Scheduler::Reserve(Sequence& s, int64_t new_position, StepPlan* plan, bool may_preempt) {
  const int64_t need = state_bytes_(new_position) - s.pool_bytes;
  while (pool_used_ + need > config_.state_pool_bytes) {
    if (!may_preempt) return false;
    // Victim: the most recently admitted running sequence not already in this step.
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (*it != &s && !InPlan(*plan, *it)) {
        victim = *it;
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

void Scheduler::AddItem(Sequence& s, int64_t len, bool restore, StepPlan* plan) {
  StepItem item;
  item.seq = &s;
  item.begin = s.num_computed;
  item.end = s.num_computed + len;
  item.sample = item.end == static_cast<int64_t>(s.tokens.size());
  item.persist = item.end % config_.block_tokens == 0 && (item.end == NextPersistPoint(s) || item.sample);
  item.restore = restore;
  plan->items.push_back(item);
  plan->num_tokens += len;
}

void Scheduler::ScheduleRunning(StepPlan* plan) {
  for (bool decode_pass : {true, false}) {
    const std::vector<Sequence*> order = running_;  // preemption edits running_
    for (Sequence* s : order) {
      if (s->status != SeqStatus::kRunning || InPlan(*plan, s)) continue;
      const bool is_decode = static_cast<int64_t>(s->tokens.size()) - s->num_computed == 1;
      if (is_decode != decode_pass) continue;
      const int64_t len = ChunkLength(*s, config_.max_step_tokens - plan->num_tokens);
      if (len <= 0) continue;
      if (!Reserve(*s, s->num_computed + len, plan, /*may_preempt=*/true)) {
        Preempt(*s, plan);  // nothing younger to evict: this one yields
        continue;
      }
      AddItem(*s, len, /*restore=*/false, plan);
    }
  }
}

// Tokens the cache restores at admission: kv's rule, and never the last token (its logits start
// the generation), whatever the index answers.
int64_t Scheduler::CachedTokens(const kv::ResumeIndex* cache, const Sequence& s) const {
  if (cache == nullptr || s.skip_cache) return 0;
  const int64_t tokens = std::min(cache->Lookup(s.cache_seed, s.tokens, s.images).tokens(),
                                  kv::MaxResumeBlocks(static_cast<int64_t>(s.tokens.size())) * kv::kBlockTokens);
  for (const auto& [first, last] : s.atomic_ranges)
    if (first < tokens && tokens < last) return 0;  // a span's rows saw rows after the cut
  return tokens;
}

void Scheduler::AdmitWaiting(const kv::ResumeIndex* cache, StepPlan* plan) {
  auto it = waiting_.begin();
  while (it != waiting_.end() && num_running() < config_.max_running && plan->num_tokens < config_.max_step_tokens) {
    Sequence& s = **it;
    s.num_computed = CachedTokens(cache, s);
    const int64_t len = ChunkLength(s, config_.max_step_tokens - plan->num_tokens);
    if (len <= 0 && s.num_computed >= s.input_limit) {  // waits for its input; the next ones go ahead
      s.num_computed = 0;
      ++it;
      continue;
    }
    if (len <= 0 || !Reserve(s, s.num_computed + len, plan, /*may_preempt=*/false)) {
      s.num_computed = 0;
      break;
    }
    it = waiting_.erase(it);
    s.skip_cache = false;
    s.status = SeqStatus::kRunning;
    s.admitted_order = ++admit_counter_;
    running_.push_back(&s);
    AddItem(s, len, /*restore=*/s.num_computed > 0, plan);
  }
}

StepPlan Scheduler::Plan(const kv::ResumeIndex* cache) {
  StepPlan plan;
  ScheduleRunning(&plan);
  AdmitWaiting(cache, &plan);
  return plan;
}

void Scheduler::Commit(const StepItem& item, std::optional<int32_t> sampled) {
  item.seq->num_computed = item.end;
  if (sampled) item.seq->tokens.push_back(*sampled);
}

void Scheduler::RestoreFailed(const StepItem& item, bool objects_gone) {
  Sequence& s = *item.seq;
  pool_used_ -= s.pool_bytes;
  s.pool_bytes = 0;
  s.num_computed = 0;
  s.status = SeqStatus::kWaiting;
  s.skip_cache = !objects_gone;
  std::erase(running_, &s);
  waiting_.push_front(&s);
}

int64_t Scheduler::PendingPromptTokens() const {
  int64_t total = 0;
  for (const Sequence* s : running_) total += std::max<int64_t>(0, s->num_prompt - s->num_computed);
  for (const Sequence* s : waiting_) total += std::max<int64_t>(0, s->num_prompt - s->num_computed);
  return total;
}

}  // namespace flashserve::sched
