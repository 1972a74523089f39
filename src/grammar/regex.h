// ECMAScript regular expressions (the subset JSON Schema `pattern` uses: literals, classes,
// escapes, groups, alternation, greedy and lazy quantifiers, ^ and $ at the ends) compiled to
// grammar expressions over UTF-8. Lookaround, backreferences and \b are refused by name.
#pragma once

#include <string_view>

#include "base/result.h"
#include "grammar/ir.h"

namespace flashserve::grammar {

struct RegexContext {
  // Produce the characters as they appear inside a JSON string literal: '"', '\' and control
  // characters in their escaped forms.
  bool json_string = false;
  // JSON Schema semantics: the pattern may match anywhere unless anchored with ^ / $.
  // Otherwise the whole text must match (^ and $ are then optional).
  bool search = false;
  // Code points no character of the match may be (taken out of every class, `.` and literal).
  CodepointRanges exclude;
};

base::Result<ExprId> CompileRegex(std::string_view pattern, const RegexContext& context, Grammar* grammar);

// Any code point in `ranges`, written as it appears in the chosen context (raw UTF-8, or
// inside a JSON string with escapes where JSON requires them).
ExprId CharacterIn(const CodepointRanges& ranges, bool json_string, Grammar* grammar);

}  // namespace flashserve::grammar
