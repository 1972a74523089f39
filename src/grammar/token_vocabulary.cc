// VocabularyFromTokenizer (grammar/token_vocabulary.h).
#include "grammar/token_vocabulary.h"

#include <algorithm>

namespace flashserve::grammar {

std::shared_ptr<const Vocabulary> VocabularyFromTokenizer(const tokenizer::Tokenizer& tok, std::vector<int32_t> end_tokens,
                                                          int64_t vocab_size, const std::vector<std::string>& text_tokens) {
  const int64_t size = std::max<int64_t>(vocab_size, tok.vocab_size());
  std::vector<std::string> bytes(static_cast<size_t>(size));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.IsAdded(id)) bytes[static_cast<size_t>(id)] = std::string(tok.TokenBytes(id));
  }
  for (const std::string& text : text_tokens) {
    if (const auto id = tok.TokenId(text); id && *id < size) bytes[static_cast<size_t>(*id)] = text;
  }
  return std::make_shared<const Vocabulary>(std::move(bytes), std::move(end_tokens));
}

}  // namespace flashserve::grammar
