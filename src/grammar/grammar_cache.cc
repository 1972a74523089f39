// Constraint dispatch and the compiled-grammar cache (grammar/grammar_cache.h).
#include "grammar/grammar_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "grammar/ebnf.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/tool_calls.h"

namespace flashserve::grammar {
namespace {

using base::Error;
using base::ErrorCode;
using protocol::ConstraintKind;

base::Result<Grammar> ChoiceGrammar(const std::string& text) {
  const auto list = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array() || list.empty()) return Error(ErrorCode::kInvalidArgument, "choices must be a non-empty array of strings");
  Grammar g;
  std::vector<ExprId> alts;
  for (const auto& c : list) {
    if (!c.is_string()) return Error(ErrorCode::kInvalidArgument, "choices must be a non-empty array of strings");
    alts.push_back(g.Bytes(c.get<std::string>()));
  }
  const int32_t root = g.AddRule("root");
  g.Define(root, g.Alt(std::move(alts)));
  g.set_root(root);
  return g;
}

base::Result<Grammar> RegexGrammar(const std::string& text) {
  Grammar g;
  FS_ASSIGN_OR_RETURN(ExprId body, CompileRegex(text, RegexContext{}, &g));
  const int32_t root = g.AddRule("root");
  g.Define(root, body);
  g.set_root(root);
  return g;
}

}  // namespace

base::Result<Grammar> BuildGrammar(const protocol::OutputConstraint& c, const JsonGrammarOptions& options) {
  switch (c.kind) {
    case ConstraintKind::kJsonSchema: {
      const auto schema = nlohmann::ordered_json::parse(c.text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return Error(ErrorCode::kInvalidArgument, "the schema is not valid JSON");
      return JsonSchemaGrammar(schema, options);
    }
    case ConstraintKind::kJsonObject: return JsonObjectGrammar(options);
    case ConstraintKind::kRegex: return RegexGrammar(c.text);
    case ConstraintKind::kChoice: return ChoiceGrammar(c.text);
    case ConstraintKind::kGrammar: return ParseEbnf(c.text);
    case ConstraintKind::kToolCalls: {
      const auto spec = nlohmann::ordered_json::parse(c.text, nullptr, /*allow_exceptions=*/false);
      if (spec.is_discarded()) return Error(ErrorCode::kInvalidArgument, "the tool-call spec is not valid JSON");
      return ToolCallGrammar(spec);
    }
    case ConstraintKind::kNone: break;
  }
  return Error(ErrorCode::kInvalidArgument, "no constraint");
}

base::Result<std::shared_ptr<const CompiledGrammar>> CompileConstraint(const protocol::OutputConstraint& c,
                                                                        std::shared_ptr<const Vocabulary> vocab) {
  FS_ASSIGN_OR_RETURN(Grammar g, BuildGrammar(c));
  FS_ASSIGN_OR_RETURN(Automaton a, Automaton::Build(g));
  return std::make_shared<const CompiledGrammar>(std::move(a), std::move(vocab));
}

void PrepareJsonStrings(std::shared_ptr<const Vocabulary> vocab) {
  auto g = CompileConstraint({protocol::ConstraintKind::kJsonSchema, R"({"type":"string"})"}, std::move(vocab));
  if (!g.ok()) return;
  Matcher m(*g);
  std::vector<uint32_t> mask((*g)->vocab().mask_words());
  if (m.AcceptBytes("\"")) m.FillMask(mask);  // classifies the string's state
}

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t max_bytes)
    : vocab_(std::move(vocab)), max_bytes_(max_bytes) {
  PrepareJsonStrings(vocab_);
}

base::Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const protocol::OutputConstraint& c) {
  const std::string key = fmt::format("{}\n{}", protocol::ConstraintKindName(c.kind), c.text);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      order_.splice(order_.begin(), order_, it->second.at);
      ++stats_.hits;
      return it->second.grammar;
    }
  }
  const double start = base::MonotonicSeconds();
  auto compiled = CompileConstraint(c, vocab_);
  const double seconds = base::MonotonicSeconds() - start;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.compile_seconds += seconds;
  if (!compiled.ok()) {
    ++stats_.errors;
    return compiled.error();
  }
  ++stats_.misses;
  if (auto it = entries_.find(key); it != entries_.end()) return it->second.grammar;  // compiled twice at once
  order_.push_front(key);
  entries_[key] = {*compiled, order_.begin()};
  // One size per entry, read once: grammars keep growing on other threads as they classify.
  std::unordered_map<std::string, size_t> sizes;
  size_t bytes = 0;
  for (const auto& [k, e] : entries_) bytes += sizes[k] = e.grammar->memory_bytes();
  while (bytes > max_bytes_ && entries_.size() > 1) {  // the newest always stays
    bytes -= sizes.at(order_.back());
    entries_.erase(order_.back());
    order_.pop_back();
  }
  stats_.entries = entries_.size();
  return *compiled;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  for (const auto& [k, e] : entries_) s.bytes += e.grammar->memory_bytes();
  return s;
}

}  // namespace flashserve::grammar
