// Recursive-descent ECMAScript regex parser producing grammar expressions (grammar/regex.h).
#include "grammar/regex.h"

#include <cctype>

#include <fmt/format.h>

namespace flashserve::grammar {
namespace {

using base::Error;
using base::ErrorCode;

const CodepointRanges kDigit = {{'0', '9'}};
const CodepointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodepointRanges kSpace = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CodepointRanges kNotLineEnd = ComplementRanges({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}});

class RegexParser {
 public:
  RegexParser(std::string_view text, const RegexContext& ctx, Grammar* g) : text_(text), ctx_(ctx), g_(g) {}

  base::Result<ExprId> Run() {
    FS_ASSIGN_OR_RETURN(ExprId e, ParseTopAlternation());
    if (pos_ < text_.size()) return Fail(fmt::format("unexpected '{}'", text_[pos_]));
    return e;
  }

 private:
  Error Fail(const std::string& what) const {
    return Error(ErrorCode::kInvalidArgument, fmt::format("regex /{}/ at offset {}: {}", text_, pos_, what));
  }
  bool More() const { return pos_ < text_.size(); }
  char Peek() const { return text_[pos_]; }

  // Top level: each branch may start with ^ and end with $; under search semantics an
  // unanchored end matches anything there.
  base::Result<ExprId> ParseTopAlternation() {
    std::vector<ExprId> branches;
    while (true) {
      bool start = false, end = false;
      if (More() && Peek() == '^') ++pos_, start = true;
      FS_ASSIGN_OR_RETURN(ExprId body, ParseSequence(/*top=*/true));
      if (More() && Peek() == '$') ++pos_, end = true;
      std::vector<ExprId> seq;
      if (ctx_.search && !start) seq.push_back(g_->Star(Char(kAllChars())));
      seq.push_back(body);
      if (ctx_.search && !end) seq.push_back(g_->Star(Char(kAllChars())));
      branches.push_back(g_->Seq(std::move(seq)));
      if (!More() || Peek() != '|') break;
      ++pos_;
    }
    return g_->Alt(std::move(branches));
  }

  static const CodepointRanges& kAllChars() {
    static const CodepointRanges all = ComplementRanges({});
    return all;
  }

  base::Result<ExprId> ParseAlternation() {
    std::vector<ExprId> branches;
    while (true) {
      FS_ASSIGN_OR_RETURN(ExprId seq, ParseSequence(false));
      branches.push_back(seq);
      if (!More() || Peek() != '|') break;
      ++pos_;
    }
    return g_->Alt(std::move(branches));
  }

  base::Result<ExprId> ParseSequence(bool top) {
    std::vector<ExprId> items;
    while (More() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        if (top && pos_ + 1 == text_.size()) break;
        if (top && pos_ + 1 < text_.size() && text_[pos_ + 1] == '|') break;
        return Fail("'$' is supported only at the end of the pattern or of a top-level branch");
      }
      if (Peek() == '^') return Fail("'^' is supported only at the start of the pattern or of a top-level branch");
      FS_ASSIGN_OR_RETURN(ExprId atom, ParseAtom());
      FS_ASSIGN_OR_RETURN(ExprId quantified, ParseQuantifier(atom));
      items.push_back(quantified);
    }
    if (items.empty()) return g_->Empty();
    return g_->Seq(std::move(items));
  }

  base::Result<ExprId> ParseQuantifier(ExprId atom) {
    if (!More()) return atom;
    int32_t min = 0, max = 0;
    const char c = Peek();
    if (c == '*') min = 0, max = kUnbounded, ++pos_;
    else if (c == '+') min = 1, max = kUnbounded, ++pos_;
    else if (c == '?') min = 0, max = 1, ++pos_;
    else if (c == '{' && LooksLikeBraces()) {
      ++pos_;
      FS_ASSIGN_OR_RETURN(min, ParseNumber());
      max = min;
      if (More() && Peek() == ',') {
        ++pos_;
        max = kUnbounded;
        if (More() && Peek() != '}') {
          FS_ASSIGN_OR_RETURN(max, ParseNumber());
          if (max < min) return Fail("quantifier {m,n} with n < m");
        }
      }
      if (!More() || Peek() != '}') return Fail("unterminated quantifier");
      ++pos_;
    } else {
      return atom;
    }
    if (More() && Peek() == '?') ++pos_;  // lazy: the same language
    if (More() && (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')) {
      if (Peek() != '{' || LooksLikeBraces()) return Fail("nothing to repeat (possessive or doubled quantifier)");
    }
    if (max != kUnbounded && max > 10000) return Fail("repetition bound above 10000");
    return g_->Repeat(atom, min, max);
  }

  bool LooksLikeBraces() const {
    size_t p = pos_ + 1;
    bool digits = false;
    while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') ++p, digits = true;
    if (!digits) return false;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') ++p;
    }
    return p < text_.size() && text_[p] == '}';
  }

  base::Result<int32_t> ParseNumber() {
    const auto v = ReadCount(text_, &pos_, 100000);
    if (!v) return Fail("expected a repetition bound up to 100000");
    return *v;
  }

  base::Result<ExprId> ParseAtom() {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      if (More() && Peek() == '?') {
        ++pos_;
        if (More() && Peek() == ':') {
          ++pos_;
        } else if (More() && Peek() == '<' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=' && text_[pos_ + 1] != '!') {
          while (More() && Peek() != '>') ++pos_;  // a named group: the name does not matter
          if (!More()) return Fail("unterminated group name");
          ++pos_;
        } else {
          return Fail("lookaround assertions are not supported");
        }
      }
      FS_ASSIGN_OR_RETURN(ExprId inner, ParseAlternation());
      if (!More() || Peek() != ')') return Fail("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return Char(kNotLineEnd);
    }
    if (c == ')') return Fail("unmatched ')'");
    if (c == '*' || c == '+' || c == '?') return Fail("nothing to repeat");
    if (c == '\\') {
      CodepointRanges set;
      FS_RETURN_IF_ERROR(ParseEscape(/*in_class=*/false, &set));
      return Char(set);
    }
    FS_ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
    return Char({{cp, cp}});
  }

  base::Result<uint32_t> NextCodepoint() {
    const auto cp = DecodeUtf8(text_, &pos_);
    if (!cp) return Fail("invalid UTF-8");
    return *cp;
  }

  base::Result<uint32_t> Hex(int digits) {
    const auto v = ReadHex(text_, &pos_, digits);
    if (!v) return Fail("bad hex escape");
    return *v;
  }

  // After a backslash: a class escape (\d \w \s and negations) or one character.
  base::Status ParseEscape(bool in_class, CodepointRanges* out) {
    ++pos_;
    if (!More()) return Fail("trailing backslash");
    const char c = Peek();
    ++pos_;
    switch (c) {
      case 'd': *out = kDigit; return base::Status::Ok();
      case 'D': *out = ComplementRanges(kDigit); return base::Status::Ok();
      case 'w': *out = kWord; return base::Status::Ok();
      case 'W': *out = ComplementRanges(kWord); return base::Status::Ok();
      case 's': *out = kSpace; return base::Status::Ok();
      case 'S': *out = ComplementRanges(kSpace); return base::Status::Ok();
      case 'n': *out = {{'\n', '\n'}}; return base::Status::Ok();
      case 't': *out = {{'\t', '\t'}}; return base::Status::Ok();
      case 'r': *out = {{'\r', '\r'}}; return base::Status::Ok();
      case 'f': *out = {{'\f', '\f'}}; return base::Status::Ok();
      case 'v': *out = {{'\v', '\v'}}; return base::Status::Ok();
      case '0': *out = {{0, 0}}; return base::Status::Ok();
      case 'b':
        if (in_class) { *out = {{8, 8}}; return base::Status::Ok(); }
        return Fail("word boundaries (\\b) are not supported");
      case 'B': return Fail("word boundaries (\\B) are not supported");
      case 'x': {
        FS_ASSIGN_OR_RETURN(uint32_t v, Hex(2));
        *out = {{v, v}};
        return base::Status::Ok();
      }
      case 'u': {
        uint32_t v = 0;
        if (More() && Peek() == '{') {
          ++pos_;
          while (More() && Peek() != '}') {
            FS_ASSIGN_OR_RETURN(uint32_t d, Hex(1));
            v = v * 16 + d;
            if (v > 0x10FFFF) return Fail("code point out of range");
          }
          if (!More()) return Fail("unterminated \\u{...}");
          ++pos_;
        } else {
          FS_ASSIGN_OR_RETURN(v, Hex(4));
        }
        *out = {{v, v}};
        return base::Status::Ok();
      }
      case 'p': case 'P': return Fail("Unicode property escapes are not supported");
      case 'k': return Fail("backreferences are not supported");
      default:
        if (c >= '1' && c <= '9') return Fail("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(c))) return Fail(fmt::format("unknown escape \\{}", c));
        --pos_;
        {
          FS_ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
          *out = {{cp, cp}};
        }
        return base::Status::Ok();
    }
  }

  base::Result<ExprId> ParseClass() {
    ++pos_;
    bool negate = false;
    if (More() && Peek() == '^') negate = true, ++pos_;
    CodepointRanges set;
    while (More() && Peek() != ']') {
      CodepointRanges item;
      FS_RETURN_IF_ERROR(ClassAtom(&item));
      if (item.size() == 1 && item[0].first == item[0].second && More() && Peek() == '-' &&
          pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        CodepointRanges hi;
        FS_RETURN_IF_ERROR(ClassAtom(&hi));
        if (hi.size() != 1 || hi[0].first != hi[0].second) return Fail("bad character range");
        if (hi[0].first < item[0].first) return Fail("character range out of order");
        set.push_back({item[0].first, hi[0].first});
      } else {
        set.insert(set.end(), item.begin(), item.end());
      }
    }
    if (!More()) return Fail("missing ']'");
    ++pos_;
    NormalizeRanges(&set);
    return Char(negate ? ComplementRanges(set) : set);
  }

  base::Status ClassAtom(CodepointRanges* out) {
    if (Peek() == '\\') return ParseEscape(/*in_class=*/true, out);
    FS_ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
    *out = {{cp, cp}};
    return base::Status::Ok();
  }

  ExprId Char(const CodepointRanges& set) {
    if (ctx_.exclude.empty()) return CharacterIn(set, ctx_.json_string, g_);
    return CharacterIn(Without(set, ctx_.exclude), ctx_.json_string, g_);
  }

  // `set` minus `exclude`.
  static CodepointRanges Without(CodepointRanges set, CodepointRanges exclude) {
    NormalizeRanges(&set);
    NormalizeRanges(&exclude);
    CodepointRanges out;
    for (auto [lo, hi] : set) {
      for (const auto& [xlo, xhi] : exclude) {
        if (xhi < lo || xlo > hi) continue;
        if (xlo > lo) out.emplace_back(lo, xlo - 1);
        if (xhi >= hi) {
          lo = 1, hi = 0;  // nothing left of this range
          break;
        }
        lo = xhi + 1;
      }
      if (lo <= hi) out.emplace_back(lo, hi);
    }
    return out;
  }

  std::string_view text_;
  RegexContext ctx_;
  Grammar* g_;
  size_t pos_ = 0;
};

}  // namespace

ExprId CharacterIn(const CodepointRanges& input, bool json_string, Grammar* g) {
  if (!json_string) return g->Codepoints(input);
  CodepointRanges ranges = input;
  NormalizeRanges(&ranges);
  CodepointRanges safe;
  std::vector<ExprId> escaped;
  auto escape = [&](uint32_t cp) {
    switch (cp) {
      case '"': return std::string("\\\"");
      case '\\': return std::string("\\\\");
      case '\n': return std::string("\\n");
      case '\r': return std::string("\\r");
      case '\t': return std::string("\\t");
      case '\b': return std::string("\\b");
      case '\f': return std::string("\\f");
      default: return fmt::format("\\u{:04x}", cp);
    }
  };
  for (const auto& [lo, hi] : ranges) {
    for (uint32_t cp = lo; cp <= hi && cp < 0x20; ++cp) escaped.push_back(g->Bytes(escape(cp)));
    uint32_t from = std::max<uint32_t>(lo, 0x20);
    for (uint32_t special : {static_cast<uint32_t>('"'), static_cast<uint32_t>('\\')}) {
      if (special >= from && special <= hi) {
        if (special > from) safe.push_back({from, special - 1});
        escaped.push_back(g->Bytes(escape(special)));
        from = special + 1;
      }
    }
    if (from <= hi) safe.push_back({from, hi});
  }
  std::vector<ExprId> alts;
  if (!safe.empty()) alts.push_back(g->Codepoints(safe));
  alts.insert(alts.end(), escaped.begin(), escaped.end());
  if (alts.empty()) return g->Set(ByteSet{});
  return g->Alt(std::move(alts));
}

base::Result<ExprId> CompileRegex(std::string_view pattern, const RegexContext& context, Grammar* grammar) {
  return RegexParser(pattern, context, grammar).Run();
}

}  // namespace flashserve::grammar
