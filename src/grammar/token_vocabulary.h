// The grammar vocabulary of a tokenizer: every byte-level token by its bytes; added tokens
// (special or not: <think>, DSML tags, placeholders) are never produced by a grammar.
#pragma once

#include <memory>
#include <vector>

#include "grammar/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::grammar {

std::shared_ptr<const Vocabulary> VocabularyFromTokenizer(const tokenizer::Tokenizer& tok, std::vector<int32_t> end_tokens,
                                                          int64_t vocab_size);

}  // namespace flashserve::grammar
