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
  // Classified alone, more than kContextAbove tokens depended on what follows the rule (a
  // number, which whitespace or a comma may end): the walk stopped; classify under the parent.
  bool needs_context = false;
};

// The context a state is classified in: alone (its rule completing inside a token leaves the
// token uncertain when the next byte may follow the rule), at the bottom of the grammar
// (nothing follows), or under a parent frame resuming in a given state.
inline constexpr int32_t kAlone = -2;
inline constexpr int32_t kAtRoot = -1;
inline constexpr size_t kContextAbove = 32;

// What the classifier's shortcuts need of a state that neither enters nor leaves a rule: its
// main successor (the one most bytes lead to, and those bytes: a chain of them is a counted
// repetition) and its character step (every valid non-ASCII character, and the ASCII bytes in
// char_ascii, lead to char_next: a chain of them is a counted repetition of characters, such as
// a bounded JSON string). -1: none.
struct ChainStep {
  int32_t main_next = -1;
  ByteSet main_bytes;
  int32_t char_next = -1;
  ByteSet char_ascii;
};

// A chain of steps from a state, as runs: while step i <= runs[k].first, the bytes every step
// up to i takes are runs[k].second. Steps past the last run do not exist.
struct ChainRuns {
  std::vector<std::pair<uint16_t, ByteSet>> runs;
  // The bytes steps 0..length-1 all take; none when the chain is shorter.
  const ByteSet& Upto(size_t length) const;
};

// The chain steps of each state and the chains they form (at most kMaxChain steps), computed
// on first use and kept. Thread-safe; returned references stay valid.
class ChainSteps {
 public:
  static constexpr size_t kMaxChain = 160;  // longer than any token of the vocabularies served

  explicit ChainSteps(const Automaton& automaton) : a_(automaton) {}
  ChainStep Get(int32_t state) const;
  const ChainRuns& MainChain(int32_t state) const;  // along main successors
  const ChainRuns& CharChain(int32_t state) const;  // along character steps (ASCII bytes only)
  // The same chain followed step by step, not kept (the reference for the two above).
  ChainRuns Follow(int32_t state, bool chars) const;
  size_t memory_bytes() const;

 private:
  const ChainRuns& Chain(int32_t state, bool chars) const;

  const Automaton& a_;
  mutable std::mutex mu_;
  mutable std::unordered_map<int32_t, ChainStep> steps_;
  mutable std::unordered_map<int32_t, ChainRuns> main_chains_, char_chains_;
  mutable std::atomic<size_t> bytes_{0};
};

// `steps`: a shared memo of character steps (null: one for this call). A state that starts a
// run of characters (a JSON string) takes the tokens made only of them from the vocabulary's
// character profile and walks only the others.
TokenClasses ClassifyState(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context,
                           const ChainSteps* steps = nullptr);
// The same classes by a walk of the whole trie: the reference for ClassifyState.
TokenClasses ClassifyStateByWalk(const Automaton& automaton, const Vocabulary& vocab, int32_t state, int32_t context);

class CompiledGrammar {
 public:
  CompiledGrammar(Automaton automaton, std::shared_ptr<const Vocabulary> vocab);
  ~CompiledGrammar();

  const Automaton& automaton() const { return automaton_; }
  const Vocabulary& vocab() const { return *vocab_; }
  // context: kAlone, kAtRoot, or the parent frame's resume state. Computes on first use.
  const TokenClasses& Classes(int32_t state, int32_t context) const;
  size_t classified() const;
  // Memory held: the automaton's tables and the token classes and chains computed so far.
  size_t memory_bytes() const;

 private:
  Automaton automaton_;
  std::shared_ptr<const Vocabulary> vocab_;
  ChainSteps chain_steps_{automaton_};
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, std::unique_ptr<const TokenClasses>> classes_;
  mutable std::atomic<size_t> class_bytes_{0};
  size_t automaton_bytes_ = 0;
};

}  // namespace flashserve::grammar
