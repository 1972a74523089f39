// Grammar construction helpers and the UTF-8 expansion of code point ranges (grammar/ir.h).
#include "grammar/ir.h"

#include <algorithm>

#include <fmt/format.h>

namespace flashserve::grammar {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

int Utf8Length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Appends byte-range sequences covering [lo, hi], both of one UTF-8 length: splits the range
// until every continuation position spans a full or aligned block, so each byte position is
// an independent range.
void SplitSameLength(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  const int n = Utf8Length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitSameLength(lo, lo | m, out);
        SplitSameLength((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitSameLength(lo, (hi & ~m) - 1, out);
        SplitSameLength(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = EncodeUtf8(lo), b = EncodeUtf8(hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); ++k) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out->push_back(std::move(seq));
}

void SplitRange(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  static constexpr uint32_t kLimits[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodepoint};
  for (uint32_t limit : kLimits) {
    if (lo > hi) return;
    if (lo <= limit) {
      const uint32_t end = std::min(hi, limit);
      SplitSameLength(lo, end, out);
      lo = end + 1;
    }
  }
}

}  // namespace

void NormalizeRanges(CodepointRanges* ranges) {
  std::sort(ranges->begin(), ranges->end());
  CodepointRanges merged;
  for (const auto& r : *ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  *ranges = std::move(merged);
}

CodepointRanges ComplementRanges(const CodepointRanges& ranges) {
  CodepointRanges in = ranges;
  in.push_back({0xD800, 0xDFFF});  // surrogates are never characters
  NormalizeRanges(&in);
  CodepointRanges out;
  uint32_t next = 0;
  for (const auto& r : in) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = std::max(next, r.second + 1);
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

std::string EncodeUtf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::optional<uint32_t> DecodeUtf8(std::string_view text, size_t* pos) {
  if (*pos >= text.size()) return std::nullopt;
  const auto b = static_cast<unsigned char>(text[*pos]);
  const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || *pos + static_cast<size_t>(n) > text.size()) return std::nullopt;
  uint32_t cp = n == 1 ? b : b & (0x7F >> n);
  for (int i = 1; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[*pos + static_cast<size_t>(i)]);
    if ((c & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (c & 0x3F);
  }
  *pos += static_cast<size_t>(n);
  return cp;
}

std::optional<uint32_t> ReadHex(std::string_view text, size_t* pos, int digits) {
  uint32_t v = 0;
  for (int i = 0; i < digits; ++i, ++*pos) {
    if (*pos >= text.size()) return std::nullopt;
    const char h = text[*pos];
    if (h >= '0' && h <= '9') v = v * 16 + static_cast<uint32_t>(h - '0');
    else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') v = v * 16 + static_cast<uint32_t>((h | 0x20) - 'a' + 10);
    else return std::nullopt;
  }
  return v;
}

std::optional<int32_t> ReadCount(std::string_view text, size_t* pos, int32_t limit) {
  int64_t v = 0;
  const size_t start = *pos;
  for (; *pos < text.size() && text[*pos] >= '0' && text[*pos] <= '9'; ++*pos) {
    v = v * 10 + (text[*pos] - '0');
    if (v > limit) return std::nullopt;
  }
  if (*pos == start) return std::nullopt;
  return static_cast<int32_t>(v);
}

ExprId Grammar::Add(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<ExprId>(exprs_.size() - 1);
}

ExprId Grammar::Empty() { return Add({}); }

ExprId Grammar::Bytes(std::string bytes) {
  if (bytes.empty()) return Empty();
  Expr e;
  e.kind = ExprKind::kBytes;
  e.bytes = std::move(bytes);
  return Add(std::move(e));
}

ExprId Grammar::Set(const ByteSet& set) {
  Expr e;
  e.kind = ExprKind::kSet;
  e.set = set;
  return Add(std::move(e));
}

ExprId Grammar::Byte(uint8_t b) {
  ByteSet set;
  set.set(b);
  return Set(set);
}

ExprId Grammar::Avoid(std::string forbidden) {
  if (forbidden.empty()) return Set(ByteSet{});
  Expr e;
  e.kind = ExprKind::kAvoid;
  e.bytes = std::move(forbidden);
  return Add(std::move(e));
}

ExprId Grammar::Ref(int32_t rule) {
  Expr e;
  e.kind = ExprKind::kRef;
  e.rule = rule;
  return Add(std::move(e));
}

ExprId Grammar::Seq(std::vector<ExprId> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kSeq;
  e.items = std::move(items);
  return Add(std::move(e));
}

ExprId Grammar::Alt(std::vector<ExprId> items) {
  if (items.size() == 1) return items[0];
  Expr e;
  e.kind = ExprKind::kAlt;
  e.items = std::move(items);
  return Add(std::move(e));
}

ExprId Grammar::Repeat(ExprId item, int32_t min, int32_t max) {
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.items = {item};
  e.min = min;
  e.max = max;
  return Add(std::move(e));
}

ExprId Grammar::Codepoints(const CodepointRanges& input) {
  CodepointRanges ranges = input;
  NormalizeRanges(&ranges);
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (const auto& r : ranges) SplitRange(r.first, std::min(r.second, kMaxCodepoint), &seqs);
  // One-byte sequences merge into one set; longer ones stay alternatives.
  ByteSet single;
  std::vector<ExprId> alts;
  for (const auto& seq : seqs) {
    if (seq.size() == 1) {
      for (int b = seq[0].first; b <= seq[0].second; ++b) single.set(static_cast<size_t>(b));
      continue;
    }
    std::vector<ExprId> items;
    for (const auto& [lo, hi] : seq) {
      ByteSet set;
      for (int b = lo; b <= hi; ++b) set.set(static_cast<size_t>(b));
      items.push_back(Set(set));
    }
    alts.push_back(Seq(std::move(items)));
  }
  if (single.any()) alts.insert(alts.begin(), Set(single));
  if (alts.empty()) return Set(ByteSet{});  // matches nothing
  return Alt(std::move(alts));
}

int32_t Grammar::AddRule(std::string name) {
  rules_.push_back({std::move(name), -1});
  return static_cast<int32_t>(rules_.size() - 1);
}

int32_t Grammar::FindRule(const std::string& name) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

}  // namespace flashserve::grammar
