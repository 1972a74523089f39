// Oniguruma -> PCRE2 pattern translation for the Split pre-tokenizer (tokenizer/pre_tokenizer.h):
// escapes whose meaning differs between the engines, and general-category classes corrected from
// PCRE2's Unicode 14 tables to the Unicode 16 tables HF's Oniguruma uses (unicode_delta.inc).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>

#include <fmt/format.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/log.h"

#include "tokenizer/pre_tokenizer.h"

namespace flashserve::tokenizer {
namespace {

base::Error BadPattern(std::string_view pattern, std::string_view why) {
  return base::MakeError(base::ErrorCode::kBadTokenizer,
                         fmt::format("Split regex \"{}\": {} (not reproducible with PCRE2)", pattern, why));
}

#include "tokenizer/unicode_delta.inc"

struct CategoryName {
  std::string_view loose;  // lower case, no '_', '-' or spaces
  std::string_view pcre2;  // the name PCRE2 understands
  std::string_view leaves;  // two-letter leaf categories, concatenated
};

constexpr CategoryName kCategoryNames[] = {
    {"l", "L", "LuLlLtLmLo"}, {"letter", "L", "LuLlLtLmLo"}, {"lc", "L&", "LuLlLt"},
    {"l&", "L&", "LuLlLt"}, {"casedletter", "L&", "LuLlLt"}, {"lu", "Lu", "Lu"},
    {"uppercaseletter", "Lu", "Lu"}, {"ll", "Ll", "Ll"}, {"lowercaseletter", "Ll", "Ll"},
    {"lt", "Lt", "Lt"}, {"titlecaseletter", "Lt", "Lt"}, {"lm", "Lm", "Lm"},
    {"modifierletter", "Lm", "Lm"}, {"lo", "Lo", "Lo"}, {"otherletter", "Lo", "Lo"},
    {"m", "M", "MnMcMe"}, {"mark", "M", "MnMcMe"}, {"combiningmark", "M", "MnMcMe"},
    {"mn", "Mn", "Mn"}, {"nonspacingmark", "Mn", "Mn"}, {"mc", "Mc", "Mc"}, {"spacingmark", "Mc", "Mc"},
    {"me", "Me", "Me"}, {"enclosingmark", "Me", "Me"}, {"n", "N", "NdNlNo"}, {"number", "N", "NdNlNo"},
    {"nd", "Nd", "Nd"}, {"decimalnumber", "Nd", "Nd"}, {"nl", "Nl", "Nl"}, {"letternumber", "Nl", "Nl"},
    {"no", "No", "No"}, {"othernumber", "No", "No"}, {"p", "P", "PcPdPsPePiPfPo"},
    {"punctuation", "P", "PcPdPsPePiPfPo"}, {"pc", "Pc", "Pc"}, {"connectorpunctuation", "Pc", "Pc"},
    {"pd", "Pd", "Pd"}, {"dashpunctuation", "Pd", "Pd"}, {"ps", "Ps", "Ps"}, {"openpunctuation", "Ps", "Ps"},
    {"pe", "Pe", "Pe"}, {"closepunctuation", "Pe", "Pe"}, {"pi", "Pi", "Pi"},
    {"initialpunctuation", "Pi", "Pi"}, {"pf", "Pf", "Pf"}, {"finalpunctuation", "Pf", "Pf"},
    {"po", "Po", "Po"}, {"otherpunctuation", "Po", "Po"}, {"s", "S", "SmScSkSo"},
    {"symbol", "S", "SmScSkSo"}, {"sm", "Sm", "Sm"}, {"mathsymbol", "Sm", "Sm"}, {"sc", "Sc", "Sc"},
    {"currencysymbol", "Sc", "Sc"}, {"sk", "Sk", "Sk"}, {"modifiersymbol", "Sk", "Sk"},
    {"so", "So", "So"}, {"othersymbol", "So", "So"}, {"z", "Z", "ZsZlZp"}, {"separator", "Z", "ZsZlZp"},
    {"zs", "Zs", "Zs"}, {"spaceseparator", "Zs", "Zs"}, {"zl", "Zl", "Zl"}, {"lineseparator", "Zl", "Zl"},
    {"zp", "Zp", "Zp"}, {"paragraphseparator", "Zp", "Zp"}, {"c", "C", "CcCfCsCoCn"},
    {"other", "C", "CcCfCsCoCn"}, {"cc", "Cc", "Cc"}, {"control", "Cc", "Cc"}, {"cf", "Cf", "Cf"},
    {"format", "Cf", "Cf"}, {"cs", "Cs", "Cs"}, {"surrogate", "Cs", "Cs"}, {"co", "Co", "Co"},
    {"privateuse", "Co", "Co"}, {"cn", "Cn", "Cn"}, {"unassigned", "Cn", "Cn"},
};

bool LeafIn(std::string_view leaves, const char* category) {
  for (size_t i = 0; i + 1 < leaves.size(); i += 2) {
    if (leaves[i] == category[0] && leaves[i + 1] == category[1]) return true;
  }
  return false;
}

// Code points (sorted) of the delta table entries whose category is among `leaves`.
template <size_t N>
std::vector<uint32_t> DeltaCodepoints(const UnicodeDeltaRange (&table)[N], std::string_view leaves) {
  std::vector<uint32_t> cps;
  for (const auto& r : table) {
    if (!LeafIn(leaves, r.category)) continue;
    for (uint32_t cp = r.first; cp <= r.last; ++cp) cps.push_back(cp);
  }
  std::sort(cps.begin(), cps.end());
  return cps;
}

std::string RangesText(const std::vector<uint32_t>& cps) {
  std::string out;
  for (size_t i = 0; i < cps.size();) {
    size_t j = i;
    while (j + 1 < cps.size() && cps[j + 1] == cps[j] + 1) ++j;
    out += fmt::format("\\x{{{:X}}}", cps[i]);
    if (j > i) out += fmt::format("-\\x{{{:X}}}", cps[j]);
    i = j + 1;
  }
  return out;
}

// \p{X} / \P{X} / \pX / \p{^X} for a general category X: PCRE2's (Unicode 14) class plus the
// ranges that changed up to Unicode 16, so the result classifies like HF's Oniguruma.
base::Status TranslateProperty(std::string_view pattern, size_t* i, bool negated, bool in_class, bool unicode16,
                               std::string* out) {
  std::string_view name;
  if (*i < pattern.size() && pattern[*i] == '{') {
    const size_t close = pattern.find('}', *i);
    if (close == std::string_view::npos) return BadPattern(pattern, "unterminated \\p{");
    name = pattern.substr(*i + 1, close - *i - 1);
    *i = close + 1;
  } else if (*i < pattern.size()) {
    name = pattern.substr((*i)++, 1);
  }
  if (!name.empty() && name[0] == '^') {
    negated = !negated;
    name.remove_prefix(1);
  }
  std::string loose;
  for (char c : name) {
    if (c != '_' && c != '-' && c != ' ') loose.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (loose == "whitespace" || loose == "space") {  // unchanged between Unicode 14 and 16
    out->append(negated ? "\\P{White_Space}" : "\\p{White_Space}");
    return base::Status::Ok();
  }
  const CategoryName* category = nullptr;
  for (const auto& c : kCategoryNames) {
    if (c.loose == loose) category = &c;
  }
  if (category == nullptr) return BadPattern(pattern, fmt::format("unsupported property \\p{{{}}}", name));
  std::vector<uint32_t> added, removed;
  if (unicode16) {
    added = DeltaCodepoints(kUnicodeAdded, category->leaves);
    removed = DeltaCodepoints(kUnicodeRemoved, category->leaves);
  }
  std::vector<uint32_t> net_added, net_removed;  // a move between two leaves of X is no change
  std::set_difference(added.begin(), added.end(), removed.begin(), removed.end(), std::back_inserter(net_added));
  std::set_difference(removed.begin(), removed.end(), added.begin(), added.end(), std::back_inserter(net_removed));
  const std::string base = fmt::format("\\p{{{}}}", category->pcre2);
  const std::string extra = RangesText(net_added);
  if (in_class) {
    if (negated && (!net_added.empty() || !net_removed.empty())) {
      return BadPattern(pattern, fmt::format("\\P{{{}}} inside a class", name));
    }
    if (!net_removed.empty()) return BadPattern(pattern, fmt::format("\\p{{{}}} inside a class", name));
    *out += negated ? fmt::format("\\P{{{}}}", category->pcre2) : base + extra;
    return base::Status::Ok();
  }
  const std::string positive = extra.empty() ? base : "[" + base + extra + "]";
  if (!negated) {
    *out += net_removed.empty() ? positive : "(?:(?![" + RangesText(net_removed) + "])" + positive + ")";
  } else {
    const std::string negative = "[^" + base + extra + "]";
    *out += net_removed.empty() ? negative : "(?:[" + RangesText(net_removed) + "]|" + negative + ")";
  }
  return base::Status::Ok();
}

constexpr std::string_view kHexClass = "0-9a-fA-F";

// Appends the translation of the escape `\c`; `in_class` says whether we are inside [...].
base::Status TranslateEscape(std::string_view pattern, size_t* i, bool in_class, bool unicode16, std::string* out) {
  const char c = pattern[*i + 1];
  auto wrap = [&](std::string_view body, bool negate) -> base::Status {
    if (in_class && negate) return BadPattern(pattern, fmt::format("\\{} inside a class", c));
    if (in_class) {
      out->append(body);
    } else {
      *out += negate ? "[^" : "[";
      *out += body;
      *out += "]";
    }
    return base::Status::Ok();
  };
  *i += 2;
  switch (c) {
    case 's': out->append("\\p{White_Space}"); return base::Status::Ok();
    case 'S': out->append("\\P{White_Space}"); return base::Status::Ok();
    case 'p': return TranslateProperty(pattern, i, false, in_class, unicode16, out);
    case 'P': return TranslateProperty(pattern, i, true, in_class, unicode16, out);
    case 'd': case 'D': {
      std::string_view nd = "{Nd}";
      size_t j = 0;
      return TranslateProperty(nd, &j, c == 'D', in_class, unicode16, out);
    }
    case 'w': case 'W': {  // Oniguruma's Unicode \w: letters, marks, decimal digits, connectors
      std::string body;
      for (std::string_view category : {"{L}", "{M}", "{Nd}", "{Pc}"}) {
        size_t j = 0;
        FS_RETURN_IF_ERROR(TranslateProperty(category, &j, false, /*in_class=*/true, unicode16, &body));
      }
      return wrap(body, c == 'W');
    }
    case 'h': return wrap(kHexClass, false);
    case 'H': return wrap(kHexClass, true);
    case 'b': case 'B': case 'X': case 'Q': case 'E': case 'G': case 'y': case 'Y': case 'O':
      return BadPattern(pattern, fmt::format("unsupported escape \\{}", c));
    case 'u': {
      if (*i + 4 > pattern.size()) return BadPattern(pattern, "truncated \\u escape");
      *out += fmt::format("\\x{{{}}}", pattern.substr(*i, 4));
      *i += 4;
      return base::Status::Ok();
    }
    default:
      out->push_back('\\');
      out->push_back(c);
      return base::Status::Ok();
  }
}

}  // namespace

base::Result<std::string> TranslateOnigurumaPattern(std::string_view pattern, bool unicode16) {
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return BadPattern(pattern, "trailing backslash");
      FS_RETURN_IF_ERROR(TranslateEscape(pattern, &i, in_class, unicode16, &out));
      continue;
    }
    if (in_class) {
      if (c == '[') return BadPattern(pattern, "nested class or POSIX bracket");
      if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') {
        return BadPattern(pattern, "class intersection &&");
      }
      if (c == ']') in_class = false;
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out.push_back(c);
      ++i;
      if (i < pattern.size() && pattern[i] == '^') out.push_back(pattern[i++]);
      if (i < pattern.size() && pattern[i] == ']') return BadPattern(pattern, "']' first in a class");
      continue;
    }
    if (c == '(' && i + 2 < pattern.size() && pattern[i + 1] == '?') {
      // Inline options: Ruby's (?m) is PCRE2's (?s); accept only i and x.
      size_t j = i + 2;
      while (j < pattern.size() && (std::isalpha(static_cast<unsigned char>(pattern[j])) || pattern[j] == '-')) {
        if (pattern[j] != 'i' && pattern[j] != 'x' && pattern[j] != '-') {
          return BadPattern(pattern, fmt::format("inline option '{}'", pattern[j]));
        }
        ++j;
      }
    }
    out.push_back(c);
    ++i;
  }
  if (in_class) return BadPattern(pattern, "unterminated class");
  return out;
}

namespace {

// Every code point whose general category differs between Unicode 14 and 16 (all >= U+0800).
struct DeltaSet {
  std::vector<uint64_t> bmp_bits = std::vector<uint64_t>(0x10000 / 64, 0);
  std::vector<std::pair<uint32_t, uint32_t>> supplementary;
  DeltaSet() {
    auto add = [this](const UnicodeDeltaRange& r) {
      for (uint32_t cp = r.first; cp <= r.last && cp < 0x10000; ++cp) bmp_bits[cp / 64] |= 1ull << (cp % 64);
      if (r.last >= 0x10000) supplementary.emplace_back(std::max<uint32_t>(r.first, 0x10000), r.last);
    };
    for (const auto& r : kUnicodeAdded) add(r);
    for (const auto& r : kUnicodeRemoved) add(r);
  }
  bool Contains(uint32_t cp) const {
    if (cp < 0x10000) return (bmp_bits[cp / 64] >> (cp % 64)) & 1;
    for (const auto& [first, last] : supplementary) {
      if (cp >= first && cp <= last) return true;
    }
    return false;
  }
};

}  // namespace

// The delta table turns PCRE2's Unicode 14..16 tables into 16.0; a newer PCRE2 knows characters
// HF does not, which only a regenerated table can undo.
void WarnIfPcre2UnicodeIsNewer() {
  char version[32] = {};
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
  if (std::atoi(version) > std::atoi(kUnicodeDeltaTo)) {
    FS_LOG(kWarning, "PCRE2 uses Unicode {}, newer than the {} tables of HF tokenizers: characters "
           "assigned since may pre-tokenize differently (regenerate unicode_delta.inc)", version, kUnicodeDeltaTo);
  }
}

bool HasUnicodeDeltaChar(std::string_view text) {
  static const DeltaSet delta;
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<uint8_t>(text[i]);
    if (b0 < 0xE0) {  // ASCII and 2-byte characters are all below U+0800
      i += b0 < 0x80 ? 1 : 2;
      continue;
    }
    const size_t n = b0 >= 0xF0 ? 4 : 3;
    if (i + n > text.size()) break;
    uint32_t cp = b0 & (n == 4 ? 0x07 : 0x0F);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    if (delta.Contains(cp)) return true;
    i += n;
  }
  return false;
}

}  // namespace flashserve::tokenizer
