// Added-token recognition (HF AddedVocabulary): leftmost-longest matching of added token strings
// in the text, first the non-normalized tokens then the normalized ones, with the single_word,
// lstrip and rstrip rules. Built once by the loader; immutable and thread-safe afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = true;
};

// A byte range of the input and the added token it holds (id -1: plain text to pre-tokenize).
// As in HF, an rstrip token may overlap the start of the next match.
struct TextSegment {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  // Splits text into segments covering it (HF extract_and_normalize with an identity normalizer).
  void Split(std::string_view text, std::vector<TextSegment>* out) const;
  bool empty() const { return tokens_.empty(); }

 private:
  struct Node {
    int32_t token_idx = -1;                         // a token ends here
    std::vector<std::pair<uint8_t, int32_t>> next;  // byte -> node
  };
  struct Trie {
    std::vector<Node> nodes{1};
    bool first_byte[256] = {};
    void Add(std::string_view key, int32_t token_idx);
    // Longest token starting at `pos`: its index and end, or -1.
    int32_t LongestAt(std::string_view text, size_t pos, size_t* end) const;
  };
  void FindMatches(std::string_view text, size_t base, const Trie& trie, std::vector<TextSegment>* out) const;

  std::vector<AddedToken> tokens_;
  Trie raw_trie_;         // normalized == false
  Trie normalized_trie_;  // normalized == true (the normalizer is the identity)
};

// Unicode White_Space (Rust regex \s), used by lstrip/rstrip.
bool IsUnicodeWhiteSpace(uint32_t codepoint);
// Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control; used by single_word.
bool IsUnicodeWordChar(uint32_t codepoint);

}  // namespace flashserve::tokenizer
