// UTF-8 validation and lossy decoding used at the CLI/API boundary and by Decode. Pure functions,
// any thread. "Lossy" follows the Unicode "maximal subpart" practice (Rust from_utf8_lossy,
// WHATWG): each maximal invalid subsequence becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace flashserve::tokenizer {

// Byte offset of the first invalid UTF-8 sequence, or text.size() when the text is valid.
size_t FindInvalidUtf8(std::string_view text);
// OK, or kInvalidUtf8 "invalid UTF-8 at byte offset N (byte 0xXX)".
base::Status ValidateUtf8(std::string_view text);
// Replaces each maximal invalid subpart by U+FFFD (valid input is returned unchanged).
std::string LossyUtf8(std::string_view bytes);
// Length of the longest prefix of `bytes` whose lossy decode can no longer change when more
// bytes are appended: everything except a trailing incomplete (but so far valid) character.
size_t StableUtf8PrefixLength(std::string_view bytes);

}  // namespace flashserve::tokenizer
