// Matcher: byte-level advance and rollback over stack sets, and token masks from the
// per-state classes plus full-stack checks of the uncertain tokens (grammar/matcher.h).
#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>

namespace flashserve::grammar {
namespace {
constexpr size_t kCachedMasks = 4;
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  set_begin_.push_back(0);
  stacks_.push_back({grammar_->automaton().rule_start(grammar_->automaton().root_rule()), kRootParent});
}

std::span<const Stack> Matcher::Current() const {
  return std::span<const Stack>(stacks_).subspan(set_begin_.back());
}

bool Matcher::Advance(std::string_view bytes) {
  const Automaton& a = grammar_->automaton();
  const size_t sets = set_begin_.size(), size = stacks_.size();
  for (unsigned char b : bytes) {
    Expand(a, &pool_, Current(), &expansion_, &scratch_);
    Step(a, expansion_.scannable, b, &step_);
    if (step_.empty()) {
      set_begin_.resize(sets);
      stacks_.resize(size);
      return false;
    }
    set_begin_.push_back(stacks_.size());
    stacks_.insert(stacks_.end(), step_.begin(), step_.end());
  }
  return true;
}

bool Matcher::AcceptBytes(std::string_view bytes) {
  if (terminated()) return false;
  const size_t before = set_begin_.size();
  if (!Advance(bytes)) return false;
  token_start_.push_back(before);
  ended_.push_back(0);
  return true;
}

bool Matcher::AcceptToken(int32_t token) {
  if (terminated() || token < 0 || static_cast<size_t>(token) >= grammar_->vocab().size()) return false;
  const auto ends = grammar_->vocab().end_tokens();
  if (std::find(ends.begin(), ends.end(), token) != ends.end()) {
    if (!CanEnd()) return false;
    token_start_.push_back(set_begin_.size());
    ended_.push_back(1);
    return true;
  }
  const std::string& bytes = grammar_->vocab().bytes(token);
  if (bytes.empty()) return false;
  return AcceptBytes(bytes);
}

void Matcher::Rollback(int tokens) {
  for (int i = 0; i < tokens && !token_start_.empty(); ++i) {
    const size_t sets = token_start_.back();
    token_start_.pop_back();
    ended_.pop_back();
    if (sets >= set_begin_.size()) continue;  // an end token added no byte positions
    stacks_.resize(set_begin_[sets]);
    set_begin_.resize(sets);
  }
}

bool Matcher::CanEnd() {
  if (terminated()) return false;
  Expand(grammar_->automaton(), &pool_, Current(), &expansion_, &scratch_);
  return expansion_.can_end;
}

bool Matcher::IsComplete() {
  if (terminated()) return true;
  Expand(grammar_->automaton(), &pool_, Current(), &expansion_, &scratch_);
  return expansion_.can_end && expansion_.scannable.empty();
}

// Whether `bytes` can be read from the single stack `start`. Frames interned on the way are
// forgotten afterwards.
bool Matcher::Survives(Stack start, std::string_view bytes) {
  const Automaton& a = grammar_->automaton();
  const size_t mark = pool_.size();
  probe_a_.assign(1, start);
  bool ok = true;
  for (unsigned char b : bytes) {
    Expand(a, &pool_, probe_a_, &probe_exp_, &scratch_);
    Step(a, probe_exp_.scannable, b, &probe_b_);
    if (probe_b_.empty()) {
      ok = false;
      break;
    }
    probe_a_.swap(probe_b_);
  }
  pool_.Truncate(mark);
  return ok;
}

bool Matcher::IsAllowed(int32_t token) {
  if (!AcceptToken(token)) return false;
  Rollback(1);
  return true;
}

void Matcher::FillMask(std::span<uint32_t> mask) {
  const std::span<const Stack> current = Current();
  for (CachedMask& c : cache_) {
    if (c.key.size() == current.size() && std::equal(c.key.begin(), c.key.end(), current.begin()) && !terminated()) {
      c.used = ++clock_;
      std::memcpy(mask.data(), c.mask.data(), std::min(mask.size(), c.mask.size()) * sizeof(uint32_t));
      return;
    }
  }
  ComputeMask(mask);
  if (terminated()) return;
  if (cache_.size() < kCachedMasks) cache_.emplace_back();
  CachedMask* slot = &cache_[0];
  for (CachedMask& c : cache_) {
    if (c.used < slot->used) slot = &c;
  }
  slot->key.assign(current.begin(), current.end());
  slot->mask.assign(mask.begin(), mask.end());
  slot->used = ++clock_;
}

void Matcher::ComputeMask(std::span<uint32_t> mask) {
  std::fill(mask.begin(), mask.end(), 0u);
  if (terminated()) return;
  const Vocabulary& vocab = grammar_->vocab();
  Expand(grammar_->automaton(), &pool_, Current(), &expansion_, &scratch_);
  const std::vector<Stack> scannable = expansion_.scannable;
  const bool can_end = expansion_.can_end;
  // Each stack's classes: alone first; a state that leaves many tokens to its context (a
  // number that whitespace may follow) is classified again under its parent frame.
  std::vector<const TokenClasses*> classes(scannable.size());
  std::vector<uint64_t> applied;
  for (size_t i = 0; i < scannable.size(); ++i) {
    const Stack& s = scannable[i];
    int32_t context = s.parent == kRootParent ? kAtRoot : kAlone;
    const TokenClasses* c = &grammar_->Classes(s.top, context);
    if (context == kAlone && c->needs_context) {
      context = pool_.frame(s.parent).state;
      c = &grammar_->Classes(s.top, context);
    }
    classes[i] = c;
    const uint64_t key = Stack{s.top, context}.key();
    if (std::find(applied.begin(), applied.end(), key) != applied.end()) continue;
    applied.push_back(key);
    if (!c->accepted_bits.empty()) {
      const size_t n = std::min(mask.size(), c->accepted_bits.size());
      for (size_t w = 0; w < n; ++w) mask[w] |= c->accepted_bits[w];
    }
    for (int32_t t : c->accepted) mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  }
  for (size_t i = 0; i < scannable.size(); ++i) {
    for (int32_t t : classes[i]->uncertain) {
      uint32_t& word = mask[static_cast<size_t>(t) / 32];
      const uint32_t bit = 1u << (t % 32);
      if (!(word & bit) && Survives(scannable[i], vocab.bytes(t))) word |= bit;
    }
  }
  if (can_end) {
    for (int32_t t : vocab.end_tokens()) mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  }
}

}  // namespace flashserve::grammar
