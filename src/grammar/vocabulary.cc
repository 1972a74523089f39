// Vocabulary trie construction (grammar/vocabulary.h).
#include "grammar/vocabulary.h"

#include <algorithm>

#include "grammar/char_profile.h"

namespace flashserve::grammar {
namespace {

// Whether bytes[from..] is UTF-8 (shortest forms, no surrogates) with possibly a partial last character.
bool Utf8From(const std::string& bytes, size_t from) {
  size_t i = from;
  while (i < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    int n = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0x80 && !Utf8Lead(b, &n, &lo, &hi)) return false;
    ++i;
    for (int k = 0; k < n && i < bytes.size(); ++k, ++i) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) return false;
    }
  }
  return true;
}

std::array<uint64_t, 4> Key(const std::bitset<256>& set) {
  std::array<uint64_t, 4> key{};
  for (size_t b = 0; b < 256; ++b) key[b / 64] |= static_cast<uint64_t>(set[b]) << (b % 64);
  return key;
}

}  // namespace

Vocabulary::Vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_tokens)
    : bytes_(std::move(bytes)), end_tokens_(std::move(end_tokens)) {
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!bytes_[i].empty()) sorted_.push_back(static_cast<int32_t>(i));
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) {
    const std::string& x = bytes_[static_cast<size_t>(a)];
    const std::string& y = bytes_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  Build(0, static_cast<int32_t>(sorted_.size()), 0, 0);
  bytes_ids_.clear();
  uint64_t h = 1469598103934665603ull;  // FNV-1a over ids, lengths and bytes
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (size_t i = 0; i < bytes_.size(); ++i) {
    mix(bytes_[i].size());
    for (unsigned char c : bytes_[i]) mix(c);
  }
  for (int32_t e : end_tokens_) mix(static_cast<uint64_t>(e) + 0x9E3779B9ull);
  fingerprint_ = h;
}

Vocabulary::~Vocabulary() = default;

const CharProfile* Vocabulary::Characters(const std::bitset<256>& ascii) const {
  std::lock_guard<std::mutex> lock(profiles_mu_);
  const auto key = Key(ascii);
  if (auto it = profiles_.find(key); it != profiles_.end()) return it->second.get();
  if (profiles_.size() >= kMaxProfiles) return nullptr;
  return (profiles_[key] = std::make_unique<const CharProfile>(*this, ascii)).get();
}

size_t Vocabulary::character_profiles() const {
  std::lock_guard<std::mutex> lock(profiles_mu_);
  return profiles_.size();
}

// The node for sorted tokens [lo, hi), which share their first `depth` bytes; returns the bytes
// on the edges into and below it.
std::bitset<256> Vocabulary::Build(int32_t lo, int32_t hi, int depth, uint8_t byte) {
  const auto self = static_cast<size_t>(nodes_.size());
  nodes_.push_back({});
  int32_t exact = lo;
  while (exact < hi && bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(exact)])].size() == static_cast<size_t>(depth)) ++exact;
  std::bitset<256> below;
  if (depth > 0) below.set(byte);
  for (int32_t i = exact; i < hi;) {
    const auto c = static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(i)])][static_cast<size_t>(depth)]);
    int32_t j = i;
    while (j < hi && static_cast<uint8_t>(bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(j)])][static_cast<size_t>(depth)]) == c) ++j;
    below |= Build(i, j, depth + 1, c);
    i = j;
  }
  Node& n = nodes_[self];
  n.byte = byte;
  n.depth = static_cast<uint16_t>(depth);
  n.subtree_end = static_cast<int32_t>(nodes_.size());
  n.tokens_begin = lo;
  n.exact_end = exact;
  n.tokens_end = hi;
  n.utf8_tail = depth > 0;
  size_t longest = 0;
  for (int32_t i = lo; i < hi; ++i) longest = std::max(longest, bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(i)])].size());
  n.span = static_cast<uint16_t>(depth > 0 ? longest - static_cast<size_t>(depth) + 1 : longest);
  size_t chars = 0;
  for (int32_t i = lo; i < hi && n.utf8_tail; ++i) {
    const std::string& token = bytes_[static_cast<size_t>(sorted_[static_cast<size_t>(i)])];
    n.utf8_tail = Utf8From(token, static_cast<size_t>(depth - 1));
    size_t starts = 0;  // characters begin at every byte that is not a continuation byte
    for (size_t k = static_cast<size_t>(depth - 1); k < token.size(); ++k) starts += (static_cast<uint8_t>(token[k]) & 0xC0) != 0x80;
    chars = std::max(chars, starts);
  }
  n.char_span = n.utf8_tail ? static_cast<uint16_t>(std::min<size_t>(chars, UINT16_MAX)) : 0;
  auto [it, fresh] = bytes_ids_.emplace(Key(below), static_cast<int32_t>(subtree_bytes_.size()));
  if (fresh) subtree_bytes_.push_back(below);
  n.bytes_index = it->second;
  return below;
}

}  // namespace flashserve::grammar
