// The pushdown side of matching. A stack is its top state plus an interned parent frame, so
// two equal stacks are two equal pairs; Expand closes a set of stacks over rule entries and
// completions, Step moves the scannable ones over one byte. A pool belongs to one thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace flashserve::grammar {

inline constexpr int32_t kRootParent = -1;      // below the root rule: completing it ends the grammar
inline constexpr int32_t kSentinelParent = -2;  // below a state classified alone: completing needs context

struct Stack {
  int32_t top = 0;
  int32_t parent = kRootParent;
  uint64_t key() const { return (static_cast<uint64_t>(static_cast<uint32_t>(top)) << 32) | static_cast<uint32_t>(parent); }
  friend bool operator==(const Stack& a, const Stack& b) { return a.top == b.top && a.parent == b.parent; }
  friend bool operator<(const Stack& a, const Stack& b) { return a.key() < b.key(); }
};

class FramePool {
 public:
  struct Frame {
    int32_t state;   // where the frame's rule resumes
    int32_t parent;  // the frame below, or kRootParent / kSentinelParent
  };
  int32_t Intern(int32_t state, int32_t parent);
  const Frame& frame(int32_t id) const { return frames_[static_cast<size_t>(id)]; }
  size_t size() const { return frames_.size(); }
  void Truncate(size_t size);  // forgets frames interned after size() was `size`

 private:
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> index_;
};

struct Expansion {
  std::vector<Stack> scannable;  // stacks whose top can take a byte
  bool can_end = false;          // the root rule can complete (the grammar may end here)
  bool escaped = false;          // a stack completed down to kSentinelParent
};

// Scratch reused between calls to keep the hot path free of allocation.
struct ExpandScratch {
  std::vector<Stack> work;
  std::vector<uint64_t> seen;
};

void Expand(const Automaton& a, FramePool* pool, std::span<const Stack> stacks, Expansion* out, ExpandScratch* scratch);

// The stacks after `byte` (sorted, unique); empty when no stack takes it.
void Step(const Automaton& a, std::span<const Stack> scannable, uint8_t byte, std::vector<Stack>* out);

}  // namespace flashserve::grammar
