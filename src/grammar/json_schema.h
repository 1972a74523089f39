// JSON Schema (draft 2020-12, the subset structured outputs use; grammar/README.md lists it)
// -> a grammar whose every sentence is a JSON text valid against the schema. A keyword that
// cannot be enforced is an error naming its path (e.g. `properties.tags.uniqueItems`).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "grammar/ir.h"

namespace flashserve::grammar {

struct JsonGrammarOptions {
  // Whitespace between tokens: none, one space, or one newline and up to this many spaces
  // (bounded, so a model cannot pad forever).
  int max_indent = 20;
  // Digits allowed in an unbounded number's integer and fraction parts.
  int max_digits = 20;
};

base::Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options = {});

// Builds JSON values into a grammar under construction (tool-call arguments). `root` resolves
// `$ref`s; it must outlive this object.
class SchemaCompiler;
class JsonValues {
 public:
  JsonValues(Grammar* grammar, const nlohmann::ordered_json& root, const JsonGrammarOptions& options = {});
  ~JsonValues();
  // A reference to the rule of the schema's values (each ends with its own whitespace).
  base::Result<ExprId> Value(const nlohmann::ordered_json& schema, const std::string& path);
  ExprId AnyValue();

 private:
  std::unique_ptr<SchemaCompiler> impl_;
};

// The text of a string schema's values under `format`, `pattern` or `minLength`/`maxLength`,
// unquoted: as written inside a JSON string (json_string), or raw with the code points in
// `exclude` left out (a DSML tool-call value keeps its markup's ｜ out). Errors name the keyword's
// path. The caller handles schemas without those keywords.
base::Result<ExprId> BoundedStringText(const nlohmann::ordered_json& schema, const std::string& path, bool json_string,
                                       const CodepointRanges& exclude, Grammar* grammar);

// Any JSON object (response_format json_object).
Grammar JsonObjectGrammar(const JsonGrammarOptions& options = {});

// The path prefix of a schema error message ("properties.a.minimum: ..."); empty when none.
std::string SchemaErrorPath(const base::Error& error);

}  // namespace flashserve::grammar
