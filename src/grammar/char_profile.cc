// Character profiles of a vocabulary (grammar/char_profile.h).
#include "grammar/char_profile.h"

#include <algorithm>

namespace flashserve::grammar {

bool Utf8Lead(uint8_t b, int* continuations, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80, *hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) *continuations = 1;
  else if (b >= 0xE0 && b <= 0xEF) *continuations = 2, *lo = b == 0xE0 ? 0xA0 : 0x80, *hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) *continuations = 3, *lo = b == 0xF0 ? 0x90 : 0x80, *hi = b == 0xF4 ? 0x8F : 0xBF;
  else return false;
  return true;
}

CharacterRun ReadCharacters(const std::string& token, const std::bitset<256>& ascii) {
  CharacterRun run;
  for (size_t i = 0; i < token.size();) {
    const auto b = static_cast<unsigned char>(token[i]);
    int n = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    const bool ok = b < 0x80 ? static_cast<bool>(ascii[b]) : Utf8Lead(b, &n, &lo, &hi);
    if (!ok) {
      run.at = i;
      return run;
    }
    size_t j = i + 1;
    for (int k = 0; k < n && j < token.size(); ++k, ++j) {
      const auto c = static_cast<unsigned char>(token[j]);
      if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) {
        run.at = j;
        run.inside = true;
        return run;
      }
    }
    i = j;
    ++run.chars;
  }
  run.at = token.size();
  return run;
}

CharProfile::CharProfile(const Vocabulary& vocab, const std::bitset<256>& ascii) {
  std::vector<std::string> others(vocab.size());
  std::vector<std::vector<int32_t>> by_chars;
  for (size_t t = 0; t < vocab.size(); ++t) {
    const std::string& bytes = vocab.bytes(static_cast<int32_t>(t));
    if (bytes.empty()) continue;
    const CharacterRun run = ReadCharacters(bytes, ascii);
    if (run.at < bytes.size()) {
      others[t] = bytes;
      continue;
    }
    const auto chars = static_cast<size_t>(run.chars);
    if (chars >= by_chars.size()) by_chars.resize(chars + 1);
    by_chars[chars].push_back(static_cast<int32_t>(t));
  }
  std::vector<uint32_t> bits(vocab.mask_words(), 0);
  within_.reserve(std::max<size_t>(by_chars.size(), 1));
  for (size_t c = 0; c < std::max<size_t>(by_chars.size(), 1); ++c) {
    if (c < by_chars.size()) {
      for (int32_t t : by_chars[c]) bits[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
    }
    within_.push_back(bits);
  }
  others_ = std::make_unique<const Vocabulary>(std::move(others), std::vector<int32_t>{});
  const auto nodes = others_->nodes();
  const auto sorted = others_->sorted_tokens();
  std::vector<Exits> by_token(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& bytes = others_->bytes(sorted[i]);
    const CharacterRun run = ReadCharacters(bytes, ascii);
    max_exit_chars_ = std::max(max_exit_chars_, static_cast<size_t>(run.chars));
    if (run.inside) by_token[i].inside = true;
    else by_token[i].at_start.set(static_cast<uint8_t>(bytes[run.at]));
  }
  exits_.resize(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int32_t i = nodes[n].tokens_begin; i < nodes[n].tokens_end; ++i) {
      exits_[n].at_start |= by_token[static_cast<size_t>(i)].at_start;
      exits_[n].inside |= by_token[static_cast<size_t>(i)].inside;
    }
  }
}

CharProfile::~CharProfile() = default;

std::span<const uint32_t> CharProfile::Within(size_t chars) const { return within_[std::min(chars, max_chars())]; }

size_t CharProfile::memory_bytes() const {
  return within_.size() * (within_.empty() ? 0 : within_[0].size() * sizeof(uint32_t)) +
         others_->nodes().size() * (sizeof(Vocabulary::Node) + sizeof(Exits)) + others_->sorted_tokens().size() * sizeof(int32_t);
}

}  // namespace flashserve::grammar
