// A grammar as data: rules whose bodies are expression trees over bytes (literals, byte sets,
// rule references, sequences, alternatives, bounded repetition). Every front end (EBNF, regex,
// JSON Schema, choice lists) builds one and the automaton compiles it. Plain data; one thread.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashserve::grammar {

using ByteSet = std::bitset<256>;
using ExprId = int32_t;
inline constexpr int32_t kUnbounded = -1;

enum class ExprKind : uint8_t { kEmpty, kBytes, kSet, kRef, kSeq, kAlt, kRepeat, kAvoid };

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  std::string bytes;            // kBytes; kAvoid: the string that must not occur
  ByteSet set;                  // kSet
  int32_t rule = -1;            // kRef
  std::vector<ExprId> items;    // kSeq, kAlt; kRepeat: items[0]
  int32_t min = 0, max = 0;     // kRepeat; max may be kUnbounded
};

struct Rule {
  std::string name;
  ExprId body = -1;  // -1 until defined
};

// Code point ranges [first, second], sorted and merged by NormalizeRanges.
using CodepointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
void NormalizeRanges(CodepointRanges* ranges);
CodepointRanges ComplementRanges(const CodepointRanges& ranges);  // within 0..0x10FFFF, minus surrogates
std::string EncodeUtf8(uint32_t codepoint);
// One UTF-8 character of `text` at *pos (advancing *pos past it); nullopt when there is none.
std::optional<uint32_t> DecodeUtf8(std::string_view text, size_t* pos);
// `digits` hexadecimal digits of `text` at *pos (advancing *pos); nullopt when they are not.
std::optional<uint32_t> ReadHex(std::string_view text, size_t* pos, int digits);
// A decimal count of `text` at *pos (advancing *pos) up to `limit`; nullopt when there is no
// digit or the count exceeds the limit.
std::optional<int32_t> ReadCount(std::string_view text, size_t* pos, int32_t limit);

class Grammar {
 public:
  ExprId Empty();
  ExprId Bytes(std::string bytes);
  ExprId Set(const ByteSet& set);
  ExprId Byte(uint8_t b);
  ExprId Ref(int32_t rule);
  ExprId Seq(std::vector<ExprId> items);
  ExprId Alt(std::vector<ExprId> items);
  ExprId Repeat(ExprId item, int32_t min, int32_t max);
  ExprId Optional(ExprId item) { return Repeat(item, 0, 1); }
  // Any bytes in which `forbidden` (non-empty) does not occur.
  ExprId Avoid(std::string forbidden);
  ExprId Star(ExprId item) { return Repeat(item, 0, kUnbounded); }
  // Any code point in the ranges, as UTF-8 byte sequences.
  ExprId Codepoints(const CodepointRanges& ranges);

  // Rules are created first and defined later, so they can refer to each other.
  int32_t AddRule(std::string name);
  void Define(int32_t rule, ExprId body) { rules_[static_cast<size_t>(rule)].body = body; }
  int32_t FindRule(const std::string& name) const;  // -1 when absent
  void set_root(int32_t rule) { root_ = rule; }

  int32_t root() const { return root_; }
  const Expr& expr(ExprId id) const { return exprs_[static_cast<size_t>(id)]; }
  const std::vector<Rule>& rules() const { return rules_; }
  size_t num_exprs() const { return exprs_.size(); }

 private:
  ExprId Add(Expr e);
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

}  // namespace flashserve::grammar
