// A grammar ready to constrain decoding on one vocabulary: the automaton plus, for each state
// that takes bytes and the context it is seen in, the tokens decided without the rest of the
// stack (accepted: the token stays inside; rejected) and those left to it (uncertain: the
// context's rule may end inside the token). Classes are computed on first use and shared by
// every sequence. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/vocabulary.h"

namespace flashserve::grammar {

struct TokenClasses {
  std::vector<uint32_t> accepted_bits;  // a bitset over the vocabulary, or empty (then the list)
  std::vector<int32_t> accepted;        // token ids, when the list is smaller than the bitset
  std::vector<int32_t> uncertain;       // token ids to check against the full stack
};

// The context a state is classified in: alone (its rule completing inside a token leaves the
// token uncertain when the next byte may follow the rule), at the bottom of the grammar
// (nothing follows), or under a parent frame resuming in a given state.
inline constexpr int32_t kAlone = -2;
inline constexpr int32_t kAtRoot = -1;

TokenClasses ClassifyState(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context);

class CompiledGrammar {
 public:
  CompiledGrammar(Automaton automaton, std::shared_ptr<const Vocabulary> vocab);
  ~CompiledGrammar();

  const Automaton& automaton() const { return automaton_; }
  const Vocabulary& vocab() const { return *vocab_; }
  // context: kAlone, kAtRoot, or the parent frame's resume state. Computes on first use.
  const TokenClasses& Classes(int32_t state, int32_t context) const;
  size_t classified() const;
  // Memory held: the automaton's tables and the token classes computed so far.
  size_t memory_bytes() const;

 private:
  Automaton automaton_;
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<const TokenClasses>> classes_;
  mutable std::atomic<size_t> class_bytes_{0};
  size_t automaton_bytes_ = 0;
};

}  // namespace flashserve::grammar
