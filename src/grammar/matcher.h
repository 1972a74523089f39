// One sequence's position in a compiled grammar: accepts tokens (or refuses them, unchanged),
// rolls back any number of accepted tokens (speculative drafts, n > 1 forks by copy), and fills
// the bitmask of tokens allowed next. Copyable; one thread at a time per matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/pda.h"

namespace flashserve::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances over one token; false (and no change) when the grammar does not allow it. An end
  // token is allowed where the grammar may end and terminates the matcher.
  bool AcceptToken(int32_t token);
  // Advances over raw bytes (text forced into the output); false and no change on a mismatch.
  bool AcceptBytes(std::string_view bytes);
  // Undoes the last `tokens` accepted tokens (AcceptBytes counts as one).
  void Rollback(int tokens);

  // Sets bit t of `mask` (vocab().mask_words() words) for every token allowed now; clears the rest.
  void FillMask(std::span<uint32_t> mask);
  // Checks one token without advancing (the naive reference path for masks).
  bool IsAllowed(int32_t token);

  bool CanEnd();                      // the output may stop here
  bool IsComplete();                  // nothing but the end may follow
  bool terminated() const { return !ended_.empty() && ended_.back(); }
  int64_t num_tokens() const { return static_cast<int64_t>(token_start_.size()); }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::span<const Stack> Current() const;
  bool Advance(std::string_view bytes);  // appends one set per byte; restores on failure
  bool Survives(Stack start, std::string_view bytes);
  void ComputeMask(std::span<uint32_t> mask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  FramePool pool_;
  ExpandScratch scratch_;
  Expansion expansion_;
  std::vector<Stack> stacks_;        // every byte position's set, concatenated
  std::vector<size_t> set_begin_;    // set k = stacks_[set_begin_[k], set_begin_[k + 1] or end)
  std::vector<size_t> token_start_;  // per accepted token: the set count before it
  std::vector<char> ended_;          // per accepted token: it was an end token
  std::vector<Stack> step_, probe_a_, probe_b_;
  Expansion probe_exp_;
  struct CachedMask {
    std::vector<Stack> key;
    std::vector<uint32_t> mask;
    uint64_t used = 0;
  };
  std::vector<CachedMask> cache_;
  uint64_t clock_ = 0;
};

}  // namespace flashserve::grammar
