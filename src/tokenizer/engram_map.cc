// Engram token map (tokenizer/engram_map.h).
#include "tokenizer/engram_map.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <unordered_map>

#include "base/check.h"

namespace flashserve::tokenizer {
namespace {

icu::UnicodeString Normalize(const icu::Normalizer2* n, const icu::UnicodeString& s) {
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeString out = n->normalize(s, status);
  FS_CHECK(U_SUCCESS(status), "ICU normalisation failed: %s", u_errorName(status));
  return out;
}

// Marks removed, then each remaining code point lowercased on its own (no context), as the
// per-character Rust mappings HF tokenizers applies.
icu::UnicodeString StripMarksAndLowercase(const icu::UnicodeString& s) {
  icu::UnicodeString out;
  for (int32_t i = 0; i < s.length();) {
    const UChar32 c = s.char32At(i);
    i += U16_LENGTH(c);
    if (U_GET_GC_MASK(c) & U_GC_M_MASK) continue;
    icu::UnicodeString one(c);
    out.append(one.toLower(icu::Locale::getRoot()));
  }
  return out;
}

// [ \t\r\n]+ -> " ", a string that is exactly " " survives, then White_Space is trimmed.
icu::UnicodeString CollapseAndTrim(const icu::UnicodeString& s) {
  icu::UnicodeString collapsed;
  bool in_run = false;
  for (int32_t i = 0; i < s.length(); ++i) {
    const UChar c = s.charAt(i);
    const bool ws = c == ' ' || c == '\t' || c == '\r' || c == '\n';
    if (ws && !in_run) collapsed.append(static_cast<UChar>(' '));
    if (!ws) collapsed.append(c);
    in_run = ws;
  }
  if (collapsed == icu::UnicodeString(" ")) return collapsed;  // HF's sentinel keeps a lone space
  int32_t begin = 0, end = collapsed.length();
  while (begin < end && u_isUWhiteSpace(collapsed.char32At(begin))) begin += U16_LENGTH(collapsed.char32At(begin));
  while (end > begin) {
    const UChar32 last = collapsed.char32At(end - 1);
    if (!u_isUWhiteSpace(last)) break;
    end -= U16_LENGTH(last);
  }
  collapsed.retainBetween(begin, end);  // a copy: tempSubStringBetween would alias this local
  return collapsed;
}

}  // namespace

std::string NormalizeForEngram(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(status);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  FS_CHECK(U_SUCCESS(status), "ICU normalisers unavailable: %s", u_errorName(status));
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  u = CollapseAndTrim(StripMarksAndLowercase(Normalize(nfd, Normalize(nfkc, u))));
  std::string out;
  u.toUTF8String(out);
  return out;
}

EngramTokenMap BuildEngramTokenMap(const Tokenizer& tokenizer) {
  EngramTokenMap m;
  std::unordered_map<std::string, int32_t> class_of;
  const int32_t n = tokenizer.vocab_size();
  m.classes.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const int32_t ids[1] = {id};
    const std::string text = tokenizer.Decode(ids);
    std::string key;
    if (text.find("\xEF\xBF\xBD") != std::string::npos) {
      key = tokenizer.TokenText(id).value_or("");
    } else {
      key = NormalizeForEngram(text);
      if (key.empty()) key = text;
    }
    auto [it, added] = class_of.emplace(std::move(key), static_cast<int32_t>(class_of.size()));
    m.classes[static_cast<size_t>(id)] = it->second;
  }
  m.num_classes = static_cast<int64_t>(class_of.size());
  return m;
}

}  // namespace flashserve::tokenizer
