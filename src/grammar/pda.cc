// Stack interning, expansion and byte steps (grammar/pda.h).
#include "grammar/pda.h"

#include <algorithm>

namespace flashserve::grammar {

int32_t FramePool::Intern(int32_t state, int32_t parent) {
  const uint64_t key = Stack{state, parent}.key();
  auto [it, fresh] = index_.emplace(key, static_cast<int32_t>(frames_.size()));
  if (fresh) frames_.push_back({state, parent});
  return it->second;
}

void FramePool::Truncate(size_t size) {
  while (frames_.size() > size) {
    index_.erase(Stack{frames_.back().state, frames_.back().parent}.key());
    frames_.pop_back();
  }
}

void Expand(const Automaton& a, FramePool* pool, std::span<const Stack> stacks, Expansion* out, ExpandScratch* scratch) {
  out->scannable.clear();
  out->can_end = false;
  out->escaped = false;
  std::vector<Stack>& work = scratch->work;
  std::vector<uint64_t>& seen = scratch->seen;
  work.assign(stacks.begin(), stacks.end());
  seen.clear();
  while (!work.empty()) {
    const Stack s = work.back();
    work.pop_back();
    const uint64_t key = s.key();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    const StateInfo& info = a.info(s.top);
    if (info.has_bytes) out->scannable.push_back(s);
    if (info.accepting) {
      if (s.parent == kRootParent) {
        out->can_end = true;
      } else if (s.parent == kSentinelParent) {
        out->escaped = true;
      } else {
        const FramePool::Frame& f = pool->frame(s.parent);
        work.push_back({f.state, f.parent});
      }
    }
    for (const RefEdge& e : a.refs(s.top)) work.push_back({a.rule_start(e.rule), pool->Intern(e.next, s.parent)});
  }
}

void Step(const Automaton& a, std::span<const Stack> scannable, uint8_t byte, std::vector<Stack>* out) {
  out->clear();
  for (const Stack& s : scannable) {
    const int32_t next = a.Next(s.top, byte);
    if (next >= 0) out->push_back({next, s.parent});
  }
  if (out->size() > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
}

}  // namespace flashserve::grammar
