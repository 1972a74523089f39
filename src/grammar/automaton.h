// A grammar compiled for matching: each rule's body becomes a deterministic automaton over
// byte classes and rule references; unproductive paths are pruned (no dead ends), left
// recursion is refused, and FIRST / FOLLOW byte sets are computed. Immutable; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "grammar/ir.h"

namespace flashserve::grammar {

struct BuildLimits {
  size_t max_nfa_states = 2'000'000;
  size_t max_states = 200'000;  // automaton states over all rules
};

struct RefEdge {
  int32_t rule = 0;
  int32_t next = 0;  // the state the referring rule resumes in after `rule` completes
};

struct StateInfo {
  int32_t rule = 0;
  bool accepting = false;   // the rule may complete here
  bool has_bytes = false;   // some byte leads on
  uint32_t refs_begin = 0, refs_end = 0;
};

class Automaton {
 public:
  static base::Result<Automaton> Build(const Grammar& grammar, const BuildLimits& limits = {});

  int32_t Next(int32_t state, uint8_t byte) const {
    return next_[static_cast<size_t>(state) * num_classes_ + class_of_[byte]];
  }
  const StateInfo& info(int32_t state) const { return states_[static_cast<size_t>(state)]; }
  std::span<const RefEdge> refs(int32_t state) const {
    const StateInfo& s = info(state);
    return {refs_.data() + s.refs_begin, s.refs_end - s.refs_begin};
  }
  int32_t rule_start(int32_t rule) const { return rule_start_[static_cast<size_t>(rule)]; }
  int32_t root_rule() const { return root_; }
  const ByteSet& follow(int32_t rule) const { return follow_[static_cast<size_t>(rule)]; }
  // The bytes that lead from a state back to itself.
  const ByteSet& loop_bytes(int32_t state) const { return loops_[static_cast<size_t>(state)]; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[static_cast<size_t>(rule)]; }
  size_t num_states() const { return states_.size(); }
  size_t num_rules() const { return rule_start_.size(); }
  int num_classes() const { return num_classes_; }
  uint8_t class_of(uint8_t byte) const { return class_of_[byte]; }  // bytes of a class lead alike

 private:
  friend class AutomatonBuilder;
  std::vector<uint8_t> class_of_ = std::vector<uint8_t>(256, 0);
  int num_classes_ = 1;
  std::vector<int32_t> next_;      // [state][class] -> state or -1
  std::vector<StateInfo> states_;
  std::vector<RefEdge> refs_;
  std::vector<int32_t> rule_start_;
  std::vector<ByteSet> follow_;
  std::vector<ByteSet> loops_;
  std::vector<std::string> rule_names_;
  int32_t root_ = 0;
};

}  // namespace flashserve::grammar
