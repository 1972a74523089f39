// The grammar vocabulary of a tokenizer: every byte-level token by its bytes; added tokens
// (special or not: <think>, placeholders) are never produced by a grammar, except those named
// in `text_tokens` (the DSML marker tool calls are written with), which read as their text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "grammar/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::grammar {

std::shared_ptr<const Vocabulary> VocabularyFromTokenizer(const tokenizer::Tokenizer& tok, std::vector<int32_t> end_tokens,
                                                          int64_t vocab_size,
                                                          const std::vector<std::string>& text_tokens = {});

}  // namespace flashserve::grammar
