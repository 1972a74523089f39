// The pieces a Tokenizer is made of (BPE model, pre-tokenizer, added tokens, id tables) and the
// tokenizer.json loader that builds them. Internal to the tokenizer room; immutable after
// ParseTokenizerJson returns, so any number of threads may read it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace flashserve::tokenizer {

struct TokenizerParts {
  BpeModel bpe;
  PreTokenizer pre_tokenizer;
  AddedTokenMatcher added_tokens;
  std::unordered_map<std::string, int32_t> text_to_id;  // added tokens take precedence, as in HF
  std::vector<std::string> id_text;                     // "" for unused ids
  std::vector<uint8_t> id_flags;                        // kIdKnown | kIdSpecial | kIdAdded
  std::string decode_bytes;                             // bytes of every id, concatenated
  std::vector<uint32_t> decode_offsets;                 // id -> [offsets[id], offsets[id + 1])
  int32_t vocab_size = 0;
};

inline constexpr uint8_t kIdKnown = 1;
inline constexpr uint8_t kIdSpecial = 2;
inline constexpr uint8_t kIdAdded = 4;

// Parses and validates tokenizer.json text; kBadTokenizer names the first unsupported or
// malformed part.
base::Result<std::unique_ptr<TokenizerParts>> ParseTokenizerJson(std::string_view json,
                                                                 const LoadOptions& options);

}  // namespace flashserve::tokenizer
