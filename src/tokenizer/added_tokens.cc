// Added-token matching (tokenizer/added_tokens.h), mirroring HF AddedVocabulary::find_matches.
#include "tokenizer/added_tokens.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "base/check.h"

namespace flashserve::tokenizer {
namespace {

// Decodes the valid UTF-8 character at pos.
uint32_t CodepointAt(std::string_view text, size_t pos, size_t* length) {
  const auto b0 = static_cast<uint8_t>(text[pos]);
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  }
  const size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n && pos + i < text.size(); ++i) cp = (cp << 6) | (text[pos + i] & 0x3F);
  *length = n;
  return cp;
}

// Start of the character that ends at `end` (end > 0).
size_t PreviousCharStart(std::string_view text, size_t end) {
  size_t pos = end - 1;
  while (pos > 0 && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

bool EndsWithWord(std::string_view text) {
  if (text.empty()) return false;
  size_t length;
  return IsUnicodeWordChar(CodepointAt(text, PreviousCharStart(text, text.size()), &length));
}

bool StartsWithWord(std::string_view text) {
  size_t length;
  return !text.empty() && IsUnicodeWordChar(CodepointAt(text, 0, &length));
}

// HF `\s*$` on text: where the trailing whitespace run starts.
size_t TrailingSpaceStart(std::string_view text) {
  size_t pos = text.size(), length;
  while (pos > 0) {
    const size_t prev = PreviousCharStart(text, pos);
    if (!IsUnicodeWhiteSpace(CodepointAt(text, prev, &length))) break;
    pos = prev;
  }
  return pos;
}

// HF `^\s*` on text: length of the leading whitespace run.
size_t LeadingSpaceLength(std::string_view text) {
  size_t pos = 0, length;
  while (pos < text.size() && IsUnicodeWhiteSpace(CodepointAt(text, pos, &length))) pos += length;
  return pos;
}

}  // namespace

bool IsUnicodeWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool IsUnicodeWordChar(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  }
  static pcre2_code* const code = [] {
    constexpr std::string_view kPattern = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern.data()), kPattern.size(),
                                  PCRE2_UTF | PCRE2_ANCHORED, &error, &offset, nullptr);
    FS_CHECK(c != nullptr, "word-class regex failed to compile (PCRE2 error %d)", error);
    return c;
  }();
  char utf8[4];
  size_t n = 0;
  if (cp < 0x800) {
    utf8[n++] = static_cast<char>(0xC0 | (cp >> 6));
  } else if (cp < 0x10000) {
    utf8[n++] = static_cast<char>(0xE0 | (cp >> 12));
    utf8[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  } else {
    utf8[n++] = static_cast<char>(0xF0 | (cp >> 18));
    utf8[n++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    utf8[n++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  }
  utf8[n++] = static_cast<char>(0x80 | (cp & 0x3F));
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(utf8), n, 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  return rc > 0;
}

void AddedTokenMatcher::Trie::Add(std::string_view key, int32_t token_idx) {
  int32_t node = 0;
  for (char ch : key) {
    const auto b = static_cast<uint8_t>(ch);
    auto& next = nodes[node].next;
    auto it = std::find_if(next.begin(), next.end(), [b](const auto& e) { return e.first == b; });
    if (it == next.end()) {
      nodes.emplace_back();
      nodes[node].next.emplace_back(b, static_cast<int32_t>(nodes.size() - 1));
      node = static_cast<int32_t>(nodes.size() - 1);
    } else {
      node = it->second;
    }
  }
  if (nodes[node].token_idx < 0) nodes[node].token_idx = token_idx;
  first_byte[static_cast<uint8_t>(key[0])] = true;
}

int32_t AddedTokenMatcher::Trie::LongestAt(std::string_view text, size_t pos, size_t* end) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    const auto& next = nodes[node].next;
    auto it = std::find_if(next.begin(), next.end(), [b](const auto& e) { return e.first == b; });
    if (it == next.end()) break;
    node = it->second;
    if (nodes[node].token_idx >= 0) {
      best = nodes[node].token_idx;
      *end = i + 1;
    }
  }
  return best;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    const auto idx = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(token);
    (token.normalized ? normalized_trie_ : raw_trie_).Add(token.content, idx);
  }
}

void AddedTokenMatcher::FindMatches(std::string_view text, size_t base, const Trie& trie,
                                    std::vector<TextSegment>* out) const {
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t match_end = 0;
    const int32_t idx = trie.LongestAt(text, pos, &match_end);
    if (idx < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[idx];
    size_t start = pos, stop = match_end;
    pos = match_end;  // the scan resumes after the match itself, as aho-corasick does
    if (token.single_word) {
      const bool start_space = start == 0 || !EndsWithWord(text.substr(0, start));
      const bool stop_space = stop == text.size() || !StartsWithWord(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += LeadingSpaceLength(text.substr(stop));
    if (start_offset < start) out->push_back({base + start_offset, base + start, -1});
    out->push_back({base + start, base + stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back({base + start_offset, base + text.size(), -1});
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<TextSegment>* out) const {
  out->clear();
  if (text.empty()) return;
  std::vector<TextSegment> first;
  FindMatches(text, 0, raw_trie_, &first);
  for (const TextSegment& seg : first) {
    if (seg.id >= 0) {
      out->push_back(seg);
    } else {
      FindMatches(text.substr(seg.begin, seg.end - seg.begin), seg.begin, normalized_trie_, out);
    }
  }
}

}  // namespace flashserve::tokenizer
