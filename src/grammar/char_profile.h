// The vocabulary as a run of character steps reads it (a JSON string, bounded or not): for one
// set of ASCII bytes taken as characters (every non-ASCII character taken too), the tokens made
// only of such characters as bitsets by how many characters they hold, and every other token as
// a vocabulary of its own to walk. Built once per byte set (Vocabulary::Characters) and used by
// the classifier (grammar/compiled_grammar.cc); immutable, any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/vocabulary.h"

namespace flashserve::grammar {

class CharProfile {
 public:
  CharProfile(const Vocabulary& vocab, const std::bitset<256>& ascii);
  ~CharProfile();

  // The tokens made only of characters, at most `chars` of them (a partial last character
  // counts as one); past max_chars(), all of them. A bitset over the vocabulary.
  std::span<const uint32_t> Within(size_t chars) const;
  size_t max_chars() const { return within_.size() - 1; }
  // The most characters a token of others() reads before it stops being characters.
  size_t max_exit_chars() const { return max_exit_chars_; }
  // Every other non-empty token, under its own id.
  const Vocabulary& others() const { return *others_; }
  // For the tokens below a node of others() (by index): the bytes where they stop being
  // characters (the first byte, at the start of a character, that is not one), and whether
  // some token stops inside a character instead.
  struct Exits {
    std::bitset<256> at_start;
    bool inside = false;
  };
  const Exits& exits(size_t node) const { return exits_[node]; }
  const std::bitset<256>& exit_bytes() const { return exits_.empty() ? kNoBytes : exits_[0].at_start; }  // all tokens
  size_t memory_bytes() const;

 private:
  static inline const std::bitset<256> kNoBytes{};
  std::vector<std::vector<uint32_t>> within_;  // [chars] -> bitset, cumulative
  std::unique_ptr<const Vocabulary> others_;
  std::vector<Exits> exits_;  // per node of others_
  size_t max_exit_chars_ = 0;
};

// A UTF-8 lead byte (shortest forms, no surrogates): how many continuation bytes follow, and
// the range of the first of them; false for bytes that cannot start a multi-byte character.
bool Utf8Lead(uint8_t lead, int* continuations, uint8_t* lo, uint8_t* hi);

// Where a token stops being characters over `ascii` (with every non-ASCII character; a partial
// last character allowed): `at` is the byte offset (the token's size when it never does),
// `chars` the characters before it, `inside` whether it stops inside a character.
struct CharacterRun {
  size_t at = 0;
  int chars = 0;
  bool inside = false;
};
CharacterRun ReadCharacters(const std::string& token, const std::bitset<256>& ascii);

}  // namespace flashserve::grammar
