// Recursive-descent parser of the EBNF dialect into a Grammar (grammar/ebnf.h).
#include "grammar/ebnf.h"

#include <cctype>
#include <map>

#include <fmt/format.h>

#include "grammar/regex.h"

namespace flashserve::grammar {
namespace {

using base::Error;
using base::ErrorCode;

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view text) : text_(text) {}

  base::Result<Grammar> Run() {
    SkipSpace();
    if (!More()) return Fail("empty grammar: define at least `root ::= ...`");
    while (More()) {
      const size_t at = pos_;
      std::string name = ParseName();
      if (name.empty()) return Fail("expected a rule name");
      SkipSpace();
      if (text_.substr(pos_, 3) != "::=") return Fail(fmt::format("expected '::=' after rule name '{}'", name));
      pos_ += 3;
      const int32_t rule = RuleId(name);
      if (defined_[rule]) return FailAt(at, fmt::format("rule '{}' is defined twice", name));
      defined_[rule] = true;
      FS_ASSIGN_OR_RETURN(ExprId body, ParseAlternatives(/*nested=*/false));
      g_.Define(rule, body);
      SkipSpace();
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_[id]) return FailAt(first_use_[id], fmt::format("rule '{}' is used but never defined", name));
    }
    const int32_t root = g_.FindRule("root");
    if (root < 0) return Fail("no `root` rule: the grammar starts at `root ::= ...`");
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  bool More() const { return pos_ < text_.size(); }
  char Peek() const { return text_[pos_]; }

  Error FailAt(size_t at, const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    return Error(ErrorCode::kInvalidArgument, fmt::format("grammar line {}, column {}: {}", line, col, what));
  }
  Error Fail(const std::string& what) const { return FailAt(pos_, what); }

  void SkipSpace() {
    while (More()) {
      if (std::isspace(static_cast<unsigned char>(Peek()))) {
        ++pos_;
      } else if (Peek() == '#') {
        while (More() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    const size_t start = pos_;
    while (More() && IsNameChar(Peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // Whether a rule definition (`name ::=`) starts here: the end of the current rule's body.
  bool AtDefinition() {
    size_t p = pos_;
    while (p < text_.size() && IsNameChar(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && std::isspace(static_cast<unsigned char>(text_[p]))) ++p;
    return text_.substr(p, 3) == "::=";
  }

  int32_t RuleId(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t id = g_.AddRule(name);
    ids_[name] = id;
    defined_.push_back(false);
    first_use_.push_back(pos_);
    return id;
  }

  base::Result<ExprId> ParseAlternatives(bool nested) {
    std::vector<ExprId> alts;
    while (true) {
      FS_ASSIGN_OR_RETURN(ExprId seq, ParseSequence(nested));
      alts.push_back(seq);
      SkipSpace();
      if (!More() || Peek() != '|') break;
      ++pos_;
    }
    return g_.Alt(std::move(alts));
  }

  base::Result<ExprId> ParseSequence(bool nested) {
    std::vector<ExprId> items;
    while (true) {
      SkipSpace();
      if (!More() || Peek() == '|' || Peek() == ')') break;
      if (!nested && AtDefinition()) break;
      FS_ASSIGN_OR_RETURN(ExprId atom, ParseAtom());
      FS_ASSIGN_OR_RETURN(ExprId rep, ParseRepetition(atom));
      items.push_back(rep);
    }
    if (More() && Peek() == ')' && !nested) return Fail("unmatched ')'");
    if (items.empty()) return g_.Empty();
    return g_.Seq(std::move(items));
  }

  base::Result<ExprId> ParseRepetition(ExprId atom) {
    while (More()) {
      const char c = Peek();
      if (c == '*') ++pos_, atom = g_.Star(atom);
      else if (c == '+') ++pos_, atom = g_.Repeat(atom, 1, kUnbounded);
      else if (c == '?') ++pos_, atom = g_.Optional(atom);
      else if (c == '{') {
        ++pos_;
        FS_ASSIGN_OR_RETURN(int32_t min, ParseInt());
        int32_t max = min;
        SkipSpace();
        if (More() && Peek() == ',') {
          ++pos_;
          SkipSpace();
          max = kUnbounded;
          if (More() && Peek() != '}') {
            FS_ASSIGN_OR_RETURN(max, ParseInt());
          }
        }
        SkipSpace();
        if (!More() || Peek() != '}') return Fail("expected '}' to close the repetition");
        ++pos_;
        if (max != kUnbounded && max < min) return Fail("repetition {m,n} with n < m");
        atom = g_.Repeat(atom, min, max);
      } else {
        break;
      }
    }
    return atom;
  }

  base::Result<int32_t> ParseInt() {
    SkipSpace();
    const auto v = ReadCount(text_, &pos_, 100000);
    if (!v) return Fail("expected a repetition count up to 100000");
    return *v;
  }

  base::Result<ExprId> ParseAtom() {
    const char c = Peek();
    if (c == '"') return ParseLiteral();
    if (c == '[') return ParseClass();
    if (c == '/') return ParseRegex();
    if (c == '.') {
      ++pos_;
      return g_.Codepoints(ComplementRanges({}));
    }
    if (c == '(') {
      ++pos_;
      FS_ASSIGN_OR_RETURN(ExprId inner, ParseAlternatives(/*nested=*/true));
      SkipSpace();
      if (!More() || Peek() != ')') return Fail("expected ')'");
      ++pos_;
      return inner;
    }
    if (IsNameChar(c)) {
      const std::string name = ParseName();
      return g_.Ref(RuleId(name));
    }
    return Fail(fmt::format("unexpected '{}'", c));
  }

  base::Result<uint32_t> ParseChar() {
    if (!More()) return Fail("unexpected end of grammar");
    const auto b = static_cast<unsigned char>(Peek());
    if (b == '\\') {
      ++pos_;
      if (!More()) return Fail("trailing backslash");
      const char e = Peek();
      ++pos_;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case 'x': return ParseHex(2);
        case 'u': return ParseHex(4);
        case 'U': return ParseHex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
          return static_cast<uint32_t>(e);
        default:
          return Fail(fmt::format("unknown escape \\{}", e));
      }
    }
    const auto cp = DecodeUtf8(text_, &pos_);
    if (!cp) return Fail("invalid UTF-8");
    return *cp;
  }

  base::Result<uint32_t> ParseHex(int digits) {
    const auto v = ReadHex(text_, &pos_, digits);
    if (!v) return Fail("bad hex escape");
    if (*v > 0x10FFFF || (*v >= 0xD800 && *v <= 0xDFFF)) return Fail("escape is not a Unicode character");
    return *v;
  }

  base::Result<ExprId> ParseLiteral() {
    ++pos_;
    std::string bytes;
    while (More() && Peek() != '"') {
      FS_ASSIGN_OR_RETURN(uint32_t cp, ParseChar());
      bytes += EncodeUtf8(cp);
    }
    if (!More()) return Fail("unterminated string literal");
    ++pos_;
    return g_.Bytes(std::move(bytes));
  }

  base::Result<ExprId> ParseClass() {
    ++pos_;
    bool negate = false;
    if (More() && Peek() == '^') negate = true, ++pos_;
    CodepointRanges set;
    while (More() && Peek() != ']') {
      FS_ASSIGN_OR_RETURN(uint32_t lo, ParseChar());
      uint32_t hi = lo;
      if (More() && Peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        FS_ASSIGN_OR_RETURN(hi, ParseChar());
        if (hi < lo) return Fail("character range out of order");
      }
      set.push_back({lo, hi});
    }
    if (!More()) return Fail("unterminated character class");
    ++pos_;
    NormalizeRanges(&set);
    return g_.Codepoints(negate ? ComplementRanges(set) : set);
  }

  base::Result<ExprId> ParseRegex() {
    const size_t start = ++pos_;
    while (More() && Peek() != '/') {
      if (Peek() == '\\') ++pos_;
      if (More()) ++pos_;
    }
    if (!More()) return Fail("unterminated /regex/");
    const std::string_view pattern = text_.substr(start, pos_ - start);
    ++pos_;
    auto e = CompileRegex(pattern, RegexContext{}, &g_);
    if (!e.ok()) return FailAt(start, e.error().message());
    return *e;
  }

  std::string_view text_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
};

}  // namespace

base::Result<Grammar> ParseEbnf(std::string_view text) { return EbnfParser(text).Run(); }

}  // namespace flashserve::grammar
