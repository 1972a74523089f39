// The tokenizer-derived token map of DeepSeek-V4.1's Engram layers (HF41
// build_compressed_token_map, v4-architecture.md section 5.4): every id is decoded alone and
// normalised (NFKC, NFD, accents stripped, lowercased, whitespace runs -> one space, trimmed,
// a lone space kept); ids whose text normalises alike share one class, numbered in order of
// first appearance. An id whose decoded text holds U+FFFD (a partial UTF-8 byte token) is
// keyed by its raw vocab form. Unicode algorithms from ICU. Pure function, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace flashserve::tokenizer {

struct EngramTokenMap {
  std::vector<int32_t> classes;  // token id -> class, for ids [0, vocab_size())
  int64_t num_classes = 0;
};

EngramTokenMap BuildEngramTokenMap(const Tokenizer& tokenizer);

// The normaliser alone (UTF-8 in and out); exposed for tests.
std::string NormalizeForEngram(std::string_view text);

}  // namespace flashserve::tokenizer
