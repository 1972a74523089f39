// The tokenizer's vocabulary as a grammar sees it: the bytes of every token, the end tokens a
// finished grammar allows, and a byte trie in depth-first order whose subtrees are contiguous
// ranges of the byte-sorted token list. Built once per tokenizer; immutable but for the character
// profiles it keeps (built on first use under a lock); any thread.
#pragma once

#include <bitset>
#include <cstdint>
#include <span>
#include <string>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace flashserve::grammar {

class CharProfile;

class Vocabulary {
 public:
  struct Node {
    uint8_t byte = 0;            // the byte leading here from the parent (root: 0)
    uint16_t depth = 0;          // bytes from the root
    int32_t subtree_end = 0;     // index one past this node's last descendant
    int32_t tokens_begin = 0;    // sorted tokens: [tokens_begin, exact_end) end here,
    int32_t exact_end = 0;       // [tokens_begin, tokens_end) lie in the subtree
    int32_t tokens_end = 0;
    int32_t bytes_index = 0;     // subtree_bytes(): every byte on the edges into and below this node
    bool utf8_tail = false;      // every token below reads as UTF-8 from this node's edge on
                                 // (a partial last character allowed)
    uint16_t span = 0;           // the most bytes a token below reads from this node's edge on
    uint16_t char_span = 0;      // with utf8_tail: the most characters it reads (a partial last one
                                 // counted)
  };

  // bytes[id]: what the token decodes to; empty for tokens a grammar never allows (control
  // and special tokens). end_tokens: allowed once the grammar is complete (EOS).
  Vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_tokens);
  ~Vocabulary();

  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  std::span<const int32_t> end_tokens() const { return end_tokens_; }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const int32_t> sorted_tokens() const { return sorted_; }
  const std::bitset<256>& subtree_bytes(const Node& n) const { return subtree_bytes_[static_cast<size_t>(n.bytes_index)]; }
  size_t mask_words() const { return (bytes_.size() + 31) / 32; }
  size_t max_token_bytes() const { return nodes_.empty() ? 0 : nodes_[0].span; }  // the root's span
  uint64_t fingerprint() const { return fingerprint_; }
  // The vocabulary as a run of characters over these ASCII bytes reads it (grammar/char_profile.h);
  // built on first use and kept for the vocabulary's life, at most kMaxProfiles of them (then
  // null for a new set: its states are classified by walking the whole trie).
  static constexpr size_t kMaxProfiles = 8;
  const CharProfile* Characters(const std::bitset<256>& ascii) const;
  size_t character_profiles() const;  // built so far

 private:
  std::bitset<256> Build(int32_t lo, int32_t hi, int depth, uint8_t byte);
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;
  std::vector<int32_t> sorted_;
  std::vector<Node> nodes_;
  std::vector<std::bitset<256>> subtree_bytes_;  // distinct sets only
  std::map<std::array<uint64_t, 4>, int32_t> bytes_ids_;  // while building
  uint64_t fingerprint_ = 0;
  mutable std::mutex profiles_mu_;
  mutable std::map<std::array<uint64_t, 4>, std::unique_ptr<const CharProfile>> profiles_;
};

}  // namespace flashserve::grammar
