// From a request's constraint to a shared compiled grammar: BuildGrammar dispatches to the
// front ends (JSON Schema, json_object, regex, choice list, EBNF); GrammarCache compiles each
// distinct constraint once per vocabulary and keeps the most recent ones. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/result.h"
#include "grammar/automaton.h"
#include "grammar/compiled_grammar.h"
#include "grammar/ir.h"
#include "grammar/json_schema.h"
#include "protocol/generate.h"

namespace flashserve::grammar {

// Errors are kInvalidArgument with a message naming the offending part (a schema path
// prefix "properties.a.minimum: ..." for schemas, a line and column for EBNF).
base::Result<Grammar> BuildGrammar(const protocol::OutputConstraint& constraint, const JsonGrammarOptions& options = {});

// Parses, builds and compiles; no vocabulary classes yet (they fill in on first use).
base::Result<std::shared_ptr<const CompiledGrammar>> CompileConstraint(const protocol::OutputConstraint& constraint,
                                                                        std::shared_ptr<const Vocabulary> vocab);

// Builds what the classes of JSON strings share on a vocabulary (its character profile, about
// 5 ms and 6 MB for 129k tokens), so the first string a request meets does not wait for it.
void PrepareJsonStrings(std::shared_ptr<const Vocabulary> vocab);

class GrammarCache {
 public:
  struct Stats {
    uint64_t hits = 0, misses = 0, errors = 0;
    double compile_seconds = 0;
    size_t entries = 0;
    size_t bytes = 0;  // automata and token classes of the grammars kept
  };

  // Keeps the most recently used grammars within `max_bytes` (their classes grow as they are
  // used; grammars in use by a sequence stay alive until it ends). Prepares JSON strings.
  explicit GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t max_bytes = size_t{256} << 20);

  base::Result<std::shared_ptr<const CompiledGrammar>> Get(const protocol::OutputConstraint& constraint);
  Stats stats() const;
  const Vocabulary& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<std::string> order_;  // most recent first
  struct Entry {
    std::shared_ptr<const CompiledGrammar> grammar;
    std::list<std::string>::iterator at;
  };
  std::unordered_map<std::string, Entry> entries_;
  Stats stats_;
};

}  // namespace flashserve::grammar
