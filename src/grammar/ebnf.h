// The EBNF dialect (GBNF-compatible, docs in grammar/README.md): `name ::= alternatives`,
// "literals", [classes], `.`, /regex/, groups, * + ? {m} {m,} {m,n}, # comments; `root` is
// the start. Errors name the line and column.
#pragma once

#include <string_view>

#include "base/result.h"
#include "grammar/ir.h"

namespace flashserve::grammar {

base::Result<Grammar> ParseEbnf(std::string_view text);

}  // namespace flashserve::grammar
