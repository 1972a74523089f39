// Test helpers for the grammar room: small vocabularies, compiling a constraint or a raw
// grammar, and full-text acceptance checks through the matcher.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/grammar_cache.h"
#include "grammar/matcher.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::grammar::testing {

// Every single byte (ids 0..255), then `words`, then the end token.
inline std::shared_ptr<const Vocabulary> ByteVocabulary(const std::vector<std::string>& words = {}) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  bytes.insert(bytes.end(), words.begin(), words.end());
  bytes.emplace_back();  // the end token has no bytes
  const auto end = static_cast<int32_t>(bytes.size() - 1);
  return std::make_shared<const Vocabulary>(std::move(bytes), std::vector<int32_t>{end});
}

// The DeepSeek vocabulary from third_party (null when it is not installed: the test skips).
inline std::shared_ptr<const Vocabulary> DeepSeekVocabulary() {
  const std::string path = FLASHSERVE_ROOT "/third_party/tokenizer/deepseek_v3/tokenizer.json";
  if (!std::filesystem::exists(path)) return nullptr;
  auto tok = tokenizer::Tokenizer::Load(path);
  if (!tok.ok()) return nullptr;
  const auto eos = (*tok)->TokenId("<｜end▁of▁sentence｜>");
  return VocabularyFromTokenizer(**tok, {eos.value_or(1)}, (*tok)->vocab_size());
}

inline std::shared_ptr<const CompiledGrammar> MustCompile(protocol::ConstraintKind kind, const std::string& text,
                                                          std::shared_ptr<const Vocabulary> vocab = ByteVocabulary()) {
  auto g = CompileConstraint({kind, text}, std::move(vocab));
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().ToString());
  return g.ok() ? *g : nullptr;
}

// Whether the whole text is a complete sentence of the grammar.
inline bool Matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

inline std::string SchemaError(const std::string& schema) {
  auto g = BuildGrammar({protocol::ConstraintKind::kJsonSchema, schema});
  return g.ok() ? std::string("<compiled>") : g.error().message();
}

}  // namespace flashserve::grammar::testing
